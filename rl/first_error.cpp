#include "rl/first_error.h"

#include "looptool/ir/error.h"

namespace looptune {

bool FirstError::capture(const std::string &where) {
    std::lock_guard<std::mutex> g(mutex_);
    if (error_) return false;
    error_ = std::current_exception();
    where_ = where;
    return true;
}

bool FirstError::empty() const {
    std::lock_guard<std::mutex> g(mutex_);
    return !error_;
}

std::string FirstError::where() const {
    std::lock_guard<std::mutex> g(mutex_);
    return where_;
}

std::exception_ptr FirstError::get() const {
    std::lock_guard<std::mutex> g(mutex_);
    return error_;
}

void FirstError::rethrow(const std::string &suffix) const {
    std::exception_ptr e;
    std::string where;
    {
        std::lock_guard<std::mutex> g(mutex_);
        e = error_;
        where = where_;
    }
    LT_CHECK(e, "FirstError::rethrow without an error");
    const std::string prefix = where.empty() ? "" : where + ": ";
    try {
        std::rethrow_exception(e);
    } catch (const looptool::InternalError &x) {
        throw looptool::InternalError(prefix + x.what() + suffix);
    } catch (const looptool::Error &x) {
        throw looptool::Error(prefix + x.what() + suffix);
    }
}

}  // namespace looptune
