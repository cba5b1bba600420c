// A numpy memory handler (NEP 49) whose arrays start on a 64-byte boundary: the kernels of a
// library, and the JIT's, stream whole cache lines only from such arrays (numpy's own are 16-byte
// aligned, and a 64-byte vector load from them spans two lines). numpy's C API is imported on
// first use, so the module still loads where numpy's headers were absent at build time.
#include "python/numpy_alignment.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#ifdef LOOPTUNE_NUMPY_HEADERS
#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL looptune_numpy_api
#include <numpy/arrayobject.h>
#endif

namespace py = pybind11;

#ifdef LOOPTUNE_NUMPY_HEADERS
namespace {

constexpr size_t kAlign = 64;
// From this size on, arrays sit on 2 MiB boundaries in transparent huge pages, as numpy's own
// allocator and the JIT's buffers do: a kernel streaming them then misses no TLB entries.
constexpr size_t kHugeFrom = size_t(4) << 20, kHuge = size_t(2) << 20;

void *aligned_malloc(void *, size_t size) {
    void *p = nullptr;
    const size_t align = size >= kHugeFrom ? kHuge : kAlign;
    // numpy asks for 0 bytes for empty arrays and expects a unique non-null pointer.
    if (posix_memalign(&p, align, size ? size : 1) != 0) return nullptr;
    if (size >= kHugeFrom) madvise(p, size / kHuge * kHuge, MADV_HUGEPAGE);  // a hint only
    return p;
}

void *aligned_calloc(void *ctx, size_t nelem, size_t elsize) {
    if (elsize && nelem > SIZE_MAX / elsize) return nullptr;
    void *p = aligned_malloc(ctx, nelem * elsize);
    if (p) std::memset(p, 0, nelem * elsize);
    return p;
}

/// realloc keeps the contents; when its block is not aligned, the contents move to one that is.
void *aligned_realloc(void *ctx, void *ptr, size_t size) {
    void *q = std::realloc(ptr, size ? size : 1);
    if (!q || reinterpret_cast<uintptr_t>(q) % kAlign == 0) return q;
    void *p = aligned_malloc(ctx, size);
    if (!p) {
        std::free(q);
        return nullptr;
    }
    std::memcpy(p, q, size);
    std::free(q);
    return p;
}

void aligned_free(void *, void *ptr, size_t) { std::free(ptr); }

PyDataMem_Handler handler = {
    "looptune_aligned64",
    1,
    {nullptr, aligned_malloc, aligned_calloc, aligned_realloc, aligned_free},
};

void import_numpy() {
    if (PyArray_API == nullptr && _import_array() < 0) throw py::error_already_set();
}

}  // namespace
#endif

void bind_numpy_alignment(py::module_ &m) {
#ifdef LOOPTUNE_NUMPY_HEADERS
    m.def("_aligned_numpy_handler", [] {
        import_numpy();
        return py::reinterpret_steal<py::object>(PyCapsule_New(&handler, "mem_handler", nullptr));
    });
    // Sets numpy's handler for the current context (None: numpy's default); returns the old one.
    m.def("_set_numpy_handler", [](py::object h) {
        import_numpy();
        PyObject *old = PyDataMem_SetHandler(h.is_none() ? nullptr : h.ptr());
        if (!old) throw py::error_already_set();
        return py::reinterpret_steal<py::object>(old);
    });
#else
    (void)m;
#endif
}
