#include "looptool/jit/export.h"

#include <fmt/format.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/IR/AttributeMask.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/SubtargetFeature.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "looptool/formats/temp_file.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/lower/lower_internal.h"
#include "looptool/lower/lower_math.h"
#include "looptool/lower/optimize.h"

namespace looptool {
namespace {

std::unique_ptr<llvm::TargetMachine> make_target_machine(const std::string &triple,
                                                         std::string &cpu) {
    detail::initialize_native_target();
    std::string err;
    const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, err);
    if (!target) throw Error(fmt::format("LLVM: no target for {}: {}", triple, err));
    // The host: its exact features, as the JIT's JITTargetMachineBuilder::detectHost() takes
    // them. Another CPU: that CPU's own features.
    std::string features;
    if (cpu.empty()) {
        cpu = llvm::sys::getHostCPUName().str();
        llvm::SubtargetFeatures f;
        for (const auto &feature : llvm::sys::getHostCPUFeatures())
            f.AddFeature(feature.first(), feature.second);
        features = f.getString();
    }
    // Checked before the target machine exists: LLVM warns on stderr about an unknown CPU.
    std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(triple, "", ""));
    if (!sti || !sti->isCPUStringValid(cpu))
        throw Error(
            fmt::format("--cpu: unknown CPU '{}' for {} (try `llc -mcpu=help`)", cpu, triple));
    std::unique_ptr<llvm::TargetMachine> tm(
        target->createTargetMachine(triple, cpu, features, llvm::TargetOptions(), llvm::Reloc::PIC_,
                                    std::nullopt, llvm::CodeGenOptLevel::Default));
    if (!tm)
        throw Error(fmt::format("LLVM: cannot create a target machine for {} ({})", triple, cpu));
    return tm;
}

// The C entry point: packs the tensors into the KernelFn's buffer array (allocating the
// temporaries the lowering still uses) and calls it with no cancel flag; the pipeline's
// always-inline folds both wrappers away.
void add_c_entry(llvm::Module &m, const Computation &c, const std::string &name,
                 const std::string &kernel_name) {
    llvm::LLVMContext &ctx = m.getContext();
    llvm::IRBuilder<> b(ctx);
    llvm::Type *ptr = b.getPtrTy();
    llvm::Function *kernel = m.getFunction(kernel_name);
    llvm::Function *body = m.getFunction(kernel_name + ".body");
    LT_CHECK(kernel && body, "export: the lowered module has no " + kernel_name);
    kernel->setLinkage(llvm::GlobalValue::InternalLinkage);
    kernel->addFnAttr(llvm::Attribute::AlwaysInline);

    std::vector<int> order;  // tensor ids of the C parameters
    for (TensorKind kind : {TensorKind::Input, TensorKind::Output})
        for (size_t t = 0; t < c.tensors.size(); ++t)
            if (c.tensors[t].kind == kind) order.push_back(int(t));
    auto *fty =
        llvm::FunctionType::get(b.getVoidTy(), std::vector<llvm::Type *>(order.size(), ptr), false);
    auto *fn = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, name, m);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
    const size_t nt = c.num_buffers();  // scratch tensors: the kernel allocates its own
    llvm::Value *buffers = b.CreateAlloca(llvm::ArrayType::get(ptr, nt), nullptr, "buffers");
    std::vector<llvm::Value *> slot(nt, nullptr), allocated;
    for (size_t i = 0; i < order.size(); ++i) {
        fn->getArg(unsigned(i))->setName(c.tensors[size_t(order[i])].name);
        slot[size_t(order[i])] = fn->getArg(unsigned(i));
    }
    auto free_fn = m.getOrInsertFunction("free", b.getVoidTy(), ptr);
    for (size_t t = 0; t < nt; ++t) {
        if (slot[t]) continue;
        if (body->getArg(unsigned(t))->use_empty()) {
            // Elided (e.g. matmul's T when C is computed in place): never touched.
            llvm::AttributeMask mask;
            mask.addAttribute(llvm::Attribute::Dereferenceable)
                .addAttribute(llvm::Attribute::Alignment);
            body->removeParamAttrs(unsigned(t), mask);
            slot[t] = llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx, 0));
            continue;
        }
        llvm::Value *p =
            detail::emit_checked_alloc(b, fn, c.tensors[t].num_elements(), c.tensors[t].name);
        slot[t] = p;
        allocated.push_back(p);
    }
    for (size_t t = 0; t < nt; ++t)
        b.CreateStore(slot[t],
                      b.CreateConstInBoundsGEP2_64(llvm::ArrayType::get(ptr, nt), buffers, 0, t));
    b.CreateCall(kernel, {buffers, llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx, 0))});
    for (llvm::Value *p : allocated) b.CreateCall(free_fn, {p});
    b.CreateRetVoid();
}

// The pool a parallel loop is handed to (`looptool_thread_pool`, the JIT's ThreadPool) becomes
// an int in the object holding the threads: what looptool_threads.c reads from it.
void bind_thread_count(llvm::Module &m, int threads) {
    llvm::GlobalVariable *pool = m.getGlobalVariable("looptool_thread_pool");
    LT_CHECK(pool, "export: a parallel kernel without looptool_thread_pool");
    llvm::Type *i32 = llvm::Type::getInt32Ty(m.getContext());
    auto *count = new llvm::GlobalVariable(m, i32, true, llvm::GlobalValue::InternalLinkage,
                                           llvm::ConstantInt::get(i32, uint64_t(threads)),
                                           "looptool_threads");
    count->setAlignment(llvm::Align(4));
    pool->replaceAllUsesWith(count);
    pool->eraseFromParent();
}

std::string shape_text(const Tensor &t) {
    std::string s;
    for (int64_t d : t.shape) s += fmt::format("[{}]", d);
    return s;
}

// How to link the kernel and whether it may be called from several threads at once.
std::string link_text(const std::string &name, int threads, bool mvec) {
    if (threads < 2)
        return fmt::format("link {}.o (needs only libc{}).\n// Thread-safe (no global state).\n",
                           name, mvec ? ", libm and libmvec: -lmvec -lm" : "");
    return fmt::format(
        "link {0}.o and looptool_threads.c{2}\n// (cc -pthread: its parallel loops run on {1} "
        "threads, the caller's included).\n// Thread-safe: one call's parallel loop runs at a "
        "time; another's meanwhile on its caller.\n",
        name, threads, mvec ? " with -lmvec -lm" : "");
}

std::string make_header(const Computation &c, const std::string &name, const std::string &cpu,
                        bool mvec, const std::string &triple, int threads, int align) {
    std::string params, tensors;
    for (TensorKind kind : {TensorKind::Input, TensorKind::Output})
        for (const Tensor &t : c.tensors)
            if (t.kind == kind) {
                params +=
                    fmt::format("{}{}float *{}", params.empty() ? "" : ", ",
                                kind == TensorKind::Input ? "const " : "", c_identifier(t.name));
                tensors +=
                    fmt::format("//   {:<8} {:<6} float{}\n", c_identifier(t.name),
                                kind == TensorKind::Input ? "input" : "output", shape_text(t));
            }
    std::string stmts;
    for (const Statement &s : c.stmts) stmts += fmt::format("//   {}\n", format_stmt(c, s));
    std::string vars;
    for (const Var &v : c.vars)
        vars += fmt::format("{}{}={}", vars.empty() ? "" : ", ", v.name, v.extent);
    const std::string guard = "LOOPTUNE_EXPORT_" + name + "_H";
    return fmt::format(
        "// {name}: a kernel exported by `looptool export` (looptune) from {name}.program.\n"
        "// Compiled for {triple}, CPU {cpu}; {link}"
        "//\n"
        "// Computes ({vars}):\n{stmts}"
        "// Tensors: float32, row-major, {align_text},\n"
        "// no two overlapping. Outputs are fully overwritten.\n"
        "{tensors}"
        "#ifndef {guard}\n#define {guard}\n\n"
        "#ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n"
        "void {name}({params});\n\n"
        "#ifdef __cplusplus\n}}\n#endif\n\n#endif\n",
        fmt::arg("name", name), fmt::arg("triple", triple), fmt::arg("cpu", cpu),
        fmt::arg("link", link_text(name, threads, mvec)), fmt::arg("vars", vars),
        fmt::arg("stmts", stmts), fmt::arg("tensors", tensors), fmt::arg("guard", guard),
        fmt::arg("params", params),
        fmt::arg("align_text", align == 64 ? "each pointer 64-byte aligned (aligned_alloc(64, ...))"
                                           : fmt::format("each pointer {}-byte aligned", align)));
}

std::string emit(llvm::TargetMachine &tm, const llvm::Module &m, llvm::CodeGenFileType type) {
    // Codegen changes the module it runs on: each file gets its own copy.
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(m);
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm.addPassesToEmitFile(pm, os, nullptr, type))
        throw Error(fmt::format("LLVM: {} cannot emit this file type", tm.getTargetCPU().str()));
    pm.run(*copy);
    return std::string(buf.begin(), buf.end());
}

// Why `name` cannot name the exported C function, or nullptr: a keyword of C or C++ breaks the
// header, a name C reserves or a libc/libm function the kernel (or its caller) links against
// would clash at link time or shadow the library's.
const char *reserved_c_name(const std::string &name) {
    static const std::set<std::string> keywords = {
        "alignas", "alignof",      "auto",      "bool",          "break",    "case",    "catch",
        "char",    "class",        "const",     "constexpr",     "continue", "default", "delete",
        "do",      "double",       "else",      "enum",          "explicit", "extern",  "false",
        "float",   "for",          "friend",    "goto",          "if",       "inline",  "int",
        "long",    "mutable",      "namespace", "new",           "noexcept", "nullptr", "operator",
        "private", "protected",    "public",    "register",      "restrict", "return",  "short",
        "signed",  "sizeof",       "static",    "static_assert", "struct",   "switch",  "template",
        "this",    "thread_local", "throw",     "true",          "try",      "typedef", "typename",
        "typeof",  "union",        "unsigned",  "using",         "virtual",  "void",    "volatile",
        "while"};
    static const std::set<std::string> libc = {
        "abort",   "abs",     "aligned_alloc", "atexit",
        "calloc",  "ceil",    "ceilf",         "cos",
        "cosf",    "exit",    "exp",           "expf",
        "fabs",    "fabsf",   "floor",         "floorf",
        "fma",     "fmaf",    "fmax",          "fmaxf",
        "fmin",    "fminf",   "free",          "log",
        "logf",    "main",    "malloc",        "memcmp",
        "memcpy",  "memmove", "memset",        "posix_memalign",
        "pow",     "powf",    "printf",        "puts",
        "realloc", "sin",     "sinf",          "sqrt",
        "sqrtf",   "strlen",  "tanh",          "tanhf"};
    if (keywords.count(name)) return "a C or C++ keyword";
    if (libc.count(name)) return "a C library function the kernel or its caller links against";
    if (name.rfind("__", 0) == 0 || (name.size() > 1 && name[0] == '_' && std::isupper(name[1])))
        return "reserved to the C implementation (starts with __ or _ and a capital)";
    return nullptr;
}

}  // namespace

std::string c_identifier(const std::string &text) {
    std::string s;
    for (char ch : text)
        s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "_" + s;
    return s;
}

ExportedKernel export_kernel(const Program &p, const ExportOptions &options) {
    const Computation &c = p.computation();
    ExportedKernel k;
    k.name = options.name.empty() ? c_identifier(c.name) : options.name;
    if (c_identifier(k.name) != k.name)
        throw Error(fmt::format("export: '{}' is not a C identifier", k.name));
    if (const char *why = reserved_c_name(k.name))
        throw Error(fmt::format("export: '{}' is {}; give another --name", k.name, why));
    for (const Tensor &t : c.tensors)
        if (t.kind != TensorKind::Temp && c_identifier(t.name) == k.name)
            throw Error(
                fmt::format("export: the function name '{}' is also a tensor's name", k.name));
    k.triple = llvm::sys::getProcessTriple();
    k.cpu = options.cpu;
    std::unique_ptr<llvm::TargetMachine> tm = make_target_machine(k.triple, k.cpu);

    llvm::LLVMContext ctx;
    const std::string kernel_name = k.name + ".kernel";
    LowerOptions lower = options.lower;
    lower.vector_math = detail::vector_math_widths(*tm);  // the CPU compiled for, not the host's
    LoweringSummary summary;
    std::unique_ptr<llvm::Module> m = detail::lower_to_module(p, ctx, kernel_name, lower, &summary);
    if (summary.parallel_nests > 0) {
        k.threads = options.lower.threads;
        bind_thread_count(*m, k.threads);
        k.runtime = exported_threads_runtime();
    }
    m->setModuleIdentifier(k.name);
    m->setDataLayout(tm->createDataLayout());
    m->setTargetTriple(k.triple);
    add_c_entry(*m, c, k.name, kernel_name);
    std::string err;
    llvm::raw_string_ostream es(err);
    LT_CHECK(!llvm::verifyModule(*m, &es), "export produced invalid LLVM IR: " + es.str());
    detail::optimize_module(*m, tm.get(), detail::ir_pipeline());

    llvm::raw_string_ostream ir(k.ir);
    m->print(ir, nullptr);
    k.assembly = emit(*tm, *m, llvm::CodeGenFileType::AssemblyFile);
    k.object = emit(*tm, *m, llvm::CodeGenFileType::ObjectFile);
    // A kernel that calls libmvec's vector functions (lower_math.h) links -lmvec.
    bool mvec = false;
    for (const llvm::Function &f : *m)
        if (f.getName().starts_with("_ZGV"))
            for (const llvm::User *u : f.users()) mvec |= llvm::isa<llvm::CallInst>(u);
    k.header = make_header(c, k.name, k.cpu, mvec, k.triple, k.threads, options.lower.buffer_align);
    k.program = serialize(p);
    return k;
}

std::vector<std::string> write_exported_kernel(const ExportedKernel &k, const std::string &dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir))
        throw Error(fmt::format("{}: cannot create the directory", dir));
    std::vector<std::pair<std::string, const std::string *>> files = {
        {k.name + ".o", &k.object},
        {k.name + ".h", &k.header},
        {k.name + ".ll", &k.ir},
        {k.name + ".s", &k.assembly},
        {k.name + ".program", &k.program}};
    if (!k.runtime.empty()) files.emplace_back("looptool_threads.c", &k.runtime);
    // Every file is written under a temporary name first (a new file: a symlink planted there is
    // never followed) and only then are all renamed, so a failure (disk full, permissions, a
    // directory in the way) leaves none of the new files behind.
    std::vector<std::string> finals, temps;
    auto discard = [&] {
        for (const auto &t : temps) fs::remove(t, ec);
    };
    for (const auto &file : files) {
        finals.push_back((fs::path(dir) / file.first).string());
        if (fs::is_directory(fs::symlink_status(finals.back())))
            throw Error(fmt::format("{}: is a directory; nothing written", finals.back()));
    }
    try {
        for (size_t i = 0; i < finals.size(); ++i)
            temps.push_back(write_temp_file(finals[i], *files[i].second));
    } catch (...) {
        discard();
        throw;
    }
    for (size_t i = 0; i < finals.size(); ++i)
        if (std::rename(temps[i].c_str(), finals[i].c_str()) != 0) {
            const std::string why = std::strerror(errno);
            discard();
            for (size_t j = 0; j < i; ++j) fs::remove(finals[j], ec);  // nothing new behind
            throw Error(
                fmt::format("{}: cannot rename {} to it ({}); the files renamed before "
                            "it were removed",
                            finals[i], temps[i], why));
        }
    return finals;
}

}  // namespace looptool
