#include "looptool/jit/jit.h"

#include <fmt/format.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <list>
#include <unordered_map>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/jit/thread_pool.h"
#include "looptool/lower/lower_internal.h"
#include "looptool/lower/lower_math.h"
#include "looptool/lower/lower_runtime.h"
#include "looptool/lower/optimize.h"
#include "util/threads.h"

namespace looptool {
namespace {

std::string take_message(llvm::Error e) { return llvm::toString(std::move(e)); }

template <typename T>
T check(llvm::Expected<T> v, const char *what) {
    if (!v) throw Error(fmt::format("LLVM JIT: {}: {}", what, take_message(v.takeError())));
    return std::move(*v);
}

void check(llvm::Error e, const char *what) {
    if (e) throw Error(fmt::format("LLVM JIT: {}: {}", what, take_message(std::move(e))));
}

}  // namespace

// One Jit per thread: the cache, the kernel counter and the shared TargetMachine used by
// the optimiser are not synchronised (the IR transform runs on the thread calling lookup).
struct Jit::Impl {
    JitOptions options;
    std::unique_ptr<llvm::orc::LLJIT> lljit;
    std::unique_ptr<llvm::TargetMachine> tm;  // the optimiser's cost model, same host/CPU
    std::string cpu, features, pipeline;
    // LRU cache: the front of `lru` is the most recently used; each kernel has its own
    // resource tracker so evicting it frees its code and mappings.
    struct Entry {
        KernelFn fn;
        llvm::orc::ResourceTrackerSP tracker;
        std::list<std::string>::iterator lru_pos;
    };
    std::unordered_map<std::string, Entry> cache;
    std::list<std::string> lru;
    int next_id = 0;
    bool timing = false;               // LOOPTOOL_JIT_TIMING: per-phase times to stderr
    double last_opt_ms = 0;            // time of the IR pipeline in the last compile
    std::unique_ptr<ThreadPool> pool;  // with threads > 1: what parallel kernels run on

    // The pool and its entry, for the kernels' `looptool_thread_pool` and
    // `looptool_parallel_for` (lower_runtime.h): absolute symbols in this Jit's own dylib.
    void define_pool_symbols() {
        llvm::orc::SymbolMap syms;
        syms[lljit->mangleAndIntern("looptool_parallel_for")] = {
            llvm::orc::ExecutorAddr::fromPtr(&looptool_parallel_for),
            llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
        syms[lljit->mangleAndIntern("looptool_thread_pool")] = {
            llvm::orc::ExecutorAddr::fromPtr(pool.get()), llvm::JITSymbolFlags::Exported};
        check(lljit->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(syms))),
              "defining the thread pool's symbols");
    }

    // libmvec's functions at `widths` (lower_math.h), as absolute symbols in this Jit's dylib;
    // returns the widths whose every function was found (none without libmvec).
    unsigned define_vector_math(unsigned widths) {
        static void *const lib = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) return 0;
        llvm::orc::SymbolMap syms;
        unsigned found = 0;
        for (unsigned w : detail::kMathWidths) {
            if (!(widths & w)) continue;
            llvm::orc::SymbolMap mine;
            for (const std::string &name : detail::vector_math_symbols(w))
                if (void *p = dlsym(lib, name.c_str()))
                    mine[lljit->mangleAndIntern(name)] = {
                        llvm::orc::ExecutorAddr::fromPtr(p),
                        llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
            if (mine.size() != detail::vector_math_symbols(w).size()) continue;
            found |= w;
            syms.insert(mine.begin(), mine.end());
        }
        if (!syms.empty())
            check(lljit->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(syms))),
                  "defining libmvec's functions");
        return found;
    }

    void optimize(llvm::Module &m) {
        if (options.verbose) {
            std::string s;
            llvm::raw_string_ostream os(s);
            m.print(os, nullptr);
            std::cerr << "; ---- LLVM IR before optimisation\n" << s;
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (options.optimize_ir) detail::optimize_module(m, tm.get(), pipeline);
        last_opt_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (options.verbose) {
            std::string s;
            llvm::raw_string_ostream os(s);
            m.print(os, nullptr);
            std::cerr << "; ---- LLVM IR after optimisation\n" << s;
        }
    }
};

Jit::Jit(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Jit::~Jit() = default;

std::unique_ptr<Jit> Jit::create(JitOptions options) {
    detail::initialize_native_target();
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->pipeline = detail::ir_pipeline();
    const char *timing = std::getenv("LOOPTOOL_JIT_TIMING");
    impl->timing = timing && *timing && std::string(timing) != "0";

    auto jtmb = check(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host");
    impl->cpu = llvm::sys::getHostCPUName().str();
    jtmb.setCPU(impl->cpu);
    // detectHost() fills the host's feature list; keep it for host_features().
    impl->features = jtmb.getFeatures().getString();
    // None compiles ~3x faster but the kernels run 3-5x slower.
    jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
    impl->tm = check(jtmb.createTargetMachine(), "creating the target machine");
    impl->lljit = check(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(jtmb).create(),
                        "creating LLJIT");
    // The runtime functions kernels call (lower_runtime.h), compiled on the first lookup of a
    // kernel that calls one, then shared by every kernel.
    impl->options.lower.shared_runtime = true;
    impl->options.lower.vector_math =
        options.vector_math ? impl->define_vector_math(detail::vector_math_widths(*impl->tm)) : 0;
    if (options.threads < 0)
        throw Error(
            fmt::format("threads {}: must be 0 (every usable core) or more", options.threads));
    impl->options.lower.threads = looptune::resolve_threads(options.threads);
    if (impl->options.lower.threads > 1) {
        impl->pool = std::make_unique<ThreadPool>(impl->options.lower.threads);
        impl->define_pool_symbols();
    }
    {
        auto ctx = std::make_unique<llvm::LLVMContext>();
        auto m = detail::runtime_module(*ctx);
        m->setDataLayout(impl->lljit->getDataLayout());
        m->setTargetTriple(impl->lljit->getTargetTriple().str());
        check(impl->lljit->addIRModule(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx))),
              "adding the runtime module");
    }
    Impl *raw = impl.get();
    impl->lljit->getIRTransformLayer().setTransform(
        [raw](llvm::orc::ThreadSafeModule tsm, const llvm::orc::MaterializationResponsibility &)
            -> llvm::Expected<llvm::orc::ThreadSafeModule> {
            llvm::Module &m = *tsm.getModuleUnlocked();
            try {
                raw->optimize(m);
            } catch (const Error &e) {
                return llvm::make_error<llvm::StringError>(e.what(),
                                                           llvm::inconvertibleErrorCode());
            }
            return tsm;
        });
    return std::unique_ptr<Jit>(new Jit(std::move(impl)));
}

Kernel Jit::compile(const Program &p) {
    const std::string key = schedule_key(p);
    if (auto it = impl_->cache.find(key); it != impl_->cache.end()) {
        impl_->lru.splice(impl_->lru.begin(), impl_->lru, it->second.lru_pos);
        return {it->second.fn, 0, true};
    }

    const auto t0 = std::chrono::steady_clock::now();
    // Every kernel has its own function name in the main JITDylib.
    const std::string name = fmt::format("looptool_kernel_{}", impl_->next_id++);
    auto ctx = std::make_unique<llvm::LLVMContext>();
    auto m = detail::lower_to_module(p, *ctx, name, impl_->options.lower, nullptr);
    const auto t1 = std::chrono::steady_clock::now();
    if (impl_->options.verbose) std::cerr << "; ---- loop tree\n" << dump(p, false) << "\n";
    llvm::orc::LLJIT &jit = *impl_->lljit;
    m->setDataLayout(jit.getDataLayout());
    m->setTargetTriple(jit.getTargetTriple().str());
    llvm::orc::ResourceTrackerSP tracker = jit.getMainJITDylib().createResourceTracker();
    check(jit.addIRModule(tracker, llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx))),
          "adding the module");
    auto addr = check(jit.lookup(name), "compiling the kernel");
    auto fn = addr.toPtr<KernelFn>();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (impl_->timing) {
        const double lower_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
        std::cerr << fmt::format(
            "jit {}: lower {:.2f} ms, IR passes {:.2f} ms, codegen+link {:.2f} ms\n", name,
            lower_ms, impl_->last_opt_ms, ms - lower_ms - impl_->last_opt_ms);
    }
    while (!impl_->lru.empty() &&
           impl_->cache.size() >= std::max<size_t>(1, impl_->options.max_cached_kernels)) {
        auto victim = impl_->cache.find(impl_->lru.back());
        check(victim->second.tracker->remove(), "freeing a cached kernel");
        impl_->cache.erase(victim);
        impl_->lru.pop_back();
    }
    impl_->lru.push_front(key);
    impl_->cache.emplace(key, Impl::Entry{fn, std::move(tracker), impl_->lru.begin()});
    return {fn, ms, false};
}

std::string Jit::llvm_ir(const Program &p) {
    return lower_to_llvm_ir(p, "looptool_kernel", impl_->options.lower).ir;
}

int Jit::threads() const { return impl_->options.lower.threads; }
std::string Jit::host_cpu() const { return impl_->cpu; }
std::string Jit::host_features() const { return impl_->features; }
size_t Jit::cache_size() const { return impl_->cache.size(); }

}  // namespace looptool
