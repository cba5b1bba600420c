// The fast path of looptune.load_library's calls (python/looptune/kernels.py): one C function
// per kind that checks its numpy arguments by reading the arrays' own fields, allocates the
// result unless `out` is given, and calls the library's function (a pointer the Python side
// took from ctypes) with the GIL released. METH_FASTCALL, not pybind11's dispatch: the call's
// cost is part of every small kernel's time. Anything it does not take as it is (not a float32
// ndarray, not C-contiguous, not 4-byte aligned, sizes that do not fit) gives None, and
// kernels.py's general path converts it or raises the error that says what is wrong.
#include "python/kernel_call.h"

#include <pybind11/numpy.h>

#include <array>
#include <cstdint>
#include <vector>

namespace py = pybind11;

namespace {

using SgemmFn = int (*)(int64_t, int64_t, int64_t, const float *, const float *, float *);
using ConvFn = int (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const float *,
                       const float *, float *);

constexpr int kNpyFloat = 11;  // NPY_FLOAT: float32

/// An ndarray's fields, read in place: pybind11's py::array wrappers cost more than the checks
/// (its default constructor alone allocates an array).
struct View {
    const py::detail::PyArray_Proxy *a = nullptr;
    int64_t dim(int i) const { return int64_t(a->dimensions[i]); }
    float *data() const { return reinterpret_cast<float *>(a->data); }
};

/// `o` as an array the kernels take as it is: a float32 ndarray in native byte order with
/// `ndim` dimensions, C-contiguous, 4-byte aligned (and writeable for an output).
bool kernel_array(PyObject *o, int ndim, bool output, View &v) {
    const auto &api = py::detail::npy_api::get();
    if (!api.PyArray_Check_(o)) return false;
    v.a = py::detail::array_proxy(o);
    const auto *d = py::detail::array_descriptor_proxy(v.a->descr);
    if (d->type_num != kNpyFloat || d->byteorder == '>' || v.a->nd != ndim) return false;
    const int need = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ |
                     (output ? py::detail::npy_api::NPY_ARRAY_WRITEABLE_ : 0);
    return (v.a->flags & need) == need && reinterpret_cast<uintptr_t>(v.a->data) % 4 == 0;
}

/// `out` (None: a new array) as the result of `shape`: a new reference, or null (no error set)
/// when `out` does not fit.
template <size_t N>
PyObject *result_array(PyObject *out, const std::array<int64_t, N> &shape, float *&data) {
    if (out == Py_None) {
        // A view 64-byte aligned into a larger array: rows of numpy's own (16-byte aligned)
        // allocation make vector stores split cache lines, which streaming kernels pay for.
        int64_t n = 1;  // on overflow the general path says what is wrong
        for (int64_t d : shape)
            if (__builtin_mul_overflow(n, d, &n)) return nullptr;
        if (__builtin_add_overflow(n, 16, &n)) return nullptr;
        py::array_t<float> raw{py::ssize_t{n}};
        float *p = raw.mutable_data();
        p += (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64 / 4;
        py::array_t<float> r(std::vector<py::ssize_t>(shape.begin(), shape.end()), p, raw);
        data = p;
        return r.release().ptr();
    }
    View v;
    if (!kernel_array(out, int(N), true, v)) return nullptr;
    for (size_t i = 0; i < N; ++i)
        if (v.dim(int(i)) != shape[i]) return nullptr;
    data = v.data();
    Py_INCREF(out);
    return out;
}

/// The result on success, the library's return code when not 0.
PyObject *finish(int rc, PyObject *result) {
    if (rc == 0) return result;
    Py_DECREF(result);
    return PyLong_FromLong(rc);
}

PyObject *not_taken() { Py_RETURN_NONE; }

// _sgemm(fn, A, B, out): C = A @ B through lt_sgemm at address fn.
PyObject *sgemm(PyObject *, PyObject *const *args, Py_ssize_t n) {
    if (n != 4) {
        PyErr_SetString(PyExc_TypeError, "_sgemm(fn, A, B, out) takes 4 arguments");
        return nullptr;
    }
    auto fn = reinterpret_cast<SgemmFn>(PyLong_AsVoidPtr(args[0]));
    if (!fn) return PyErr_Occurred() ? nullptr : not_taken();
    try {
        View a, b;
        if (!kernel_array(args[1], 2, false, a) || !kernel_array(args[2], 2, false, b) ||
            a.dim(1) != b.dim(0))
            return not_taken();
        const int64_t m = a.dim(0), k = a.dim(1), nn = b.dim(1);
        float *c = nullptr;
        PyObject *result = result_array<2>(args[3], {m, nn}, c);
        if (!result) return not_taken();
        PyThreadState *unlocked = PyEval_SaveThread();
        const int rc = fn(m, nn, k, a.data(), b.data(), c);
        PyEval_RestoreThread(unlocked);
        return finish(rc, result);
    } catch (py::error_already_set &e) {
        e.restore();
        return nullptr;
    }
}

// _sconv2d(fn, X, W, out): the convolution through lt_sconv2d at address fn.
PyObject *sconv2d(PyObject *, PyObject *const *args, Py_ssize_t n) {
    if (n != 4) {
        PyErr_SetString(PyExc_TypeError, "_sconv2d(fn, X, W, out) takes 4 arguments");
        return nullptr;
    }
    auto fn = reinterpret_cast<ConvFn>(PyLong_AsVoidPtr(args[0]));
    if (!fn) return PyErr_Occurred() ? nullptr : not_taken();
    try {
        View x, w;
        if (!kernel_array(args[1], 4, false, x) || !kernel_array(args[2], 4, false, w))
            return not_taken();
        const int64_t nb = x.dim(0), ci = x.dim(1), h = x.dim(2), wd = x.dim(3);
        const int64_t co = w.dim(0), kh = w.dim(2), kw = w.dim(3);
        if (w.dim(1) != ci || kh < 1 || kw < 1 || kh > h || kw > wd) return not_taken();
        float *y = nullptr;
        PyObject *result = result_array<4>(args[3], {nb, co, h - kh + 1, wd - kw + 1}, y);
        if (!result) return not_taken();
        PyThreadState *unlocked = PyEval_SaveThread();
        const int rc = fn(nb, ci, h, wd, co, kh, kw, x.data(), w.data(), y);
        PyEval_RestoreThread(unlocked);
        return finish(rc, result);
    } catch (py::error_already_set &e) {
        e.restore();
        return nullptr;
    }
}

PyMethodDef kMethods[] = {
    {"_sgemm", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&sgemm)), METH_FASTCALL,
     "_sgemm(fn, A, B, out): lt_sgemm at address fn on float32 C-contiguous arrays; the "
     "result, the library's non-zero return code, or None when the arguments need the general "
     "path (looptune/kernels.py)"},
    {"_sconv2d", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&sconv2d)),
     METH_FASTCALL, "_sconv2d(fn, X, W, out): as _sgemm, for lt_sconv2d"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_kernel_calls(py::module_ &m) {
    if (PyModule_AddFunctions(m.ptr(), kMethods) != 0) throw py::error_already_set();
}
