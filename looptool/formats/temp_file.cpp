#include "looptool/formats/temp_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "looptool/ir/error.h"

namespace looptool {

namespace {

// A new file at a random name next to `path`; a name that exists is never reused (O_EXCL).
int create_exclusive(const std::string &path, std::string &name) {
    static thread_local std::mt19937_64 rng(std::random_device{}() ^ uint64_t(::getpid()));
    for (int attempt = 0; attempt < 64; ++attempt) {
        name = fmt::format("{}.tmp.{:08x}", path, uint32_t(rng()));
        const int fd =
            ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

}  // namespace

std::string write_temp_file(const std::string &path, std::string_view content) {
    std::string name;
    const int fd = create_exclusive(path, name);
    if (fd < 0)
        throw Error(fmt::format("{}: cannot create a temporary file beside it: {}", path,
                                std::strerror(errno)));
    size_t done = 0;
    while (done < content.size()) {
        const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += size_t(n);
    }
    const int write_errno = done == content.size() ? 0 : (errno ? errno : EIO);
    if (::close(fd) != 0 || write_errno != 0) {
        const int e = write_errno ? write_errno : errno;
        ::unlink(name.c_str());
        throw Error(fmt::format("{}: write failed: {}", path, std::strerror(e)));
    }
    return name;
}

}  // namespace looptool
