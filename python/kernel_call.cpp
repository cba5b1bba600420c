// The fast path of looptune.load_library's calls (python/looptune/kernels.py): one C function
// per kind that checks its numpy arguments by reading the arrays' own fields, allocates the
// result unless `out` is given, and calls the library's function (a pointer the Python side
// took from ctypes) with the GIL released (above a size). Plain C API, not pybind11's dispatch:
// the call's cost is part of every small kernel's time. Anything it does not take as it is (not a
// float32 ndarray, not C-contiguous, not 4-byte aligned, sizes that do not fit) gives None, and
// kernels.py's general path converts it or raises the error that says what is wrong.
#include "python/kernel_call.h"

#include <pybind11/numpy.h>

#include <structmember.h>

#include <array>
#include <cstdint>
#include <iterator>
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

/// Runs `call` with the GIL released when it does at least `flops` >= 2^20 (about 10 us at
/// 100 GFLOPS), as numpy releases it only above a size: for a call of a few microseconds,
/// releasing and taking the GIL back costs more of it than other threads could use.
template <class F>
int run_kernel(double flops, F call) {
    constexpr double kReleaseFrom = double(1 << 20);
    if (flops < kReleaseFrom) return call();
    PyThreadState *unlocked = PyEval_SaveThread();
    const int rc = call();
    PyEval_RestoreThread(unlocked);
    return rc;
}

/// C = A @ B through lt_sgemm at `fn`: the result, the library's return code (an int) when not
/// 0, None when the arguments need the general path, or null with an error set.
PyObject *try_sgemm(void *fn, PyObject *A, PyObject *B, PyObject *out) {
    try {
        View a, b;
        if (!kernel_array(A, 2, false, a) || !kernel_array(B, 2, false, b) || a.dim(1) != b.dim(0))
            return not_taken();
        const int64_t m = a.dim(0), k = a.dim(1), nn = b.dim(1);
        float *c = nullptr;
        PyObject *result = result_array<2>(out, {m, nn}, c);
        if (!result) return not_taken();
        const int rc = run_kernel(2.0 * double(m) * double(nn) * double(k), [&] {
            return reinterpret_cast<SgemmFn>(fn)(m, nn, k, a.data(), b.data(), c);
        });
        return finish(rc, result);
    } catch (py::error_already_set &e) {
        e.restore();
        return nullptr;
    }
}

/// The convolution (stride 1, no padding) through lt_sconv2d at `fn`; returns as try_sgemm.
PyObject *try_sconv2d(void *fn, PyObject *X, PyObject *W, PyObject *out) {
    try {
        View x, w;
        if (!kernel_array(X, 4, false, x) || !kernel_array(W, 4, false, w)) return not_taken();
        const int64_t nb = x.dim(0), ci = x.dim(1), h = x.dim(2), wd = x.dim(3);
        const int64_t co = w.dim(0), kh = w.dim(2), kw = w.dim(3);
        if (w.dim(1) != ci || kh < 1 || kw < 1 || kh > h || kw > wd) return not_taken();
        float *y = nullptr;
        PyObject *result = result_array<4>(out, {nb, co, h - kh + 1, wd - kw + 1}, y);
        if (!result) return not_taken();
        const double flops = 2.0 * double(nb) * double(co) * double(h - kh + 1) *
                             double(wd - kw + 1) * double(ci) * double(kh) * double(kw);
        const int rc = run_kernel(flops, [&] {
            return reinterpret_cast<ConvFn>(fn)(nb, ci, h, wd, co, kh, kw, x.data(), w.data(), y);
        });
        return finish(rc, result);
    } catch (py::error_already_set &e) {
        e.restore();
        return nullptr;
    }
}

/// One list of the kinds a KernelCall calls: its `kind` indexes it.
using TryFn = PyObject *(*)(void *, PyObject *, PyObject *, PyObject *);
constexpr TryFn kTry[] = {&try_sgemm, &try_sconv2d};
constexpr const char *kKindNames[] = {"sgemm", "sconv2d"};
constexpr int kKinds = int(std::size(kTry));

// _sgemm(fn, A, B, out) and _sconv2d(fn, X, W, out): the fast paths on their own.
template <int Kind>
PyObject *entry(PyObject *, PyObject *const *args, Py_ssize_t n) {
    if (n != 4) {
        PyErr_Format(PyExc_TypeError, "_%s(fn, A, B, out) takes 4 arguments", kKindNames[Kind]);
        return nullptr;
    }
    void *fn = PyLong_AsVoidPtr(args[0]);
    if (!fn) return PyErr_Occurred() ? nullptr : not_taken();
    return kTry[Kind](fn, args[1], args[2], args[3]);
}

/// looptune._core.KernelCall(fn, kind, general): a callable `(A, B, *, out=None, ...)` that
/// runs the fast path and hands every call it does not take (other keywords, arguments to
/// convert or copy, a non-zero return code to raise on) to `general` with the same
/// arguments. A type with vectorcall, not a Python function around _sgemm: the Python frame
/// cost more than the checks, the call and the GIL's release together.
struct KernelCall {
    PyObject_HEAD vectorcallfunc vectorcall;
    void *fn;
    int kind;
    PyObject *general;
};

PyObject *kernel_call_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
    auto *k = reinterpret_cast<KernelCall *>(self);
    const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    const Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    const bool out_only = nk == 0 || (nk == 1 && PyUnicode_CompareWithASCIIString(
                                                     PyTuple_GET_ITEM(kwnames, 0), "out") == 0);
    if (n == 2 && out_only) {
        PyObject *r = kTry[k->kind](k->fn, args[0], args[1], nk ? args[2] : Py_None);
        if (!r || (r != Py_None && !PyLong_CheckExact(r))) return r;
        Py_DECREF(r);  // None or a return code: the general path converts, or raises
    }
    return PyObject_Vectorcall(k->general, args, nargsf, kwnames);
}

PyObject *kernel_call_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *address = nullptr, *general = nullptr;
    int kind = 0;
    static const char *names[] = {"fn", "kind", "general", nullptr};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OiO:KernelCall", const_cast<char **>(names),
                                     &address, &kind, &general))
        return nullptr;
    void *fn = PyLong_AsVoidPtr(address);
    if (!fn) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "KernelCall: fn is null");
        return nullptr;
    }
    if (kind < 0 || kind >= kKinds || !PyCallable_Check(general)) {
        PyErr_Format(PyExc_ValueError, "KernelCall: kind must be 0..%d, general callable",
                     kKinds - 1);
        return nullptr;
    }
    auto *k = reinterpret_cast<KernelCall *>(type->tp_alloc(type, 0));
    if (!k) return nullptr;
    k->vectorcall = &kernel_call_vectorcall;
    k->fn = fn;
    k->kind = kind;
    k->general = Py_NewRef(general);
    return reinterpret_cast<PyObject *>(k);
}

int kernel_call_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(reinterpret_cast<KernelCall *>(self)->general);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

int kernel_call_clear(PyObject *self) {
    Py_CLEAR(reinterpret_cast<KernelCall *>(self)->general);
    return 0;
}

void kernel_call_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    kernel_call_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

// The general path's docstring is the call's: help(lib.sgemm) shows what it takes.
PyObject *kernel_call_doc(PyObject *self, void *) {
    return PyObject_GetAttrString(reinterpret_cast<KernelCall *>(self)->general, "__doc__");
}

PyObject *kernel_call_repr(PyObject *self) {
    auto *k = reinterpret_cast<KernelCall *>(self);
    return PyUnicode_FromFormat("<looptune kernel call %s>", kKindNames[k->kind]);
}

PyMemberDef kKernelCallMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(KernelCall, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef kKernelCallGetSet[] = {{"__doc__", &kernel_call_doc, nullptr, nullptr, nullptr},
                                   {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot kKernelCallSlots[] = {{Py_tp_new, reinterpret_cast<void *>(&kernel_call_new)},
                                  {Py_tp_call, reinterpret_cast<void *>(&PyVectorcall_Call)},
                                  {Py_tp_traverse, reinterpret_cast<void *>(&kernel_call_traverse)},
                                  {Py_tp_clear, reinterpret_cast<void *>(&kernel_call_clear)},
                                  {Py_tp_dealloc, reinterpret_cast<void *>(&kernel_call_dealloc)},
                                  {Py_tp_repr, reinterpret_cast<void *>(&kernel_call_repr)},
                                  {Py_tp_members, kKernelCallMembers},
                                  {Py_tp_getset, kKernelCallGetSet},
                                  {0, nullptr}};

PyType_Spec kKernelCallSpec = {"looptune._core.KernelCall", sizeof(KernelCall), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                               kKernelCallSlots};

PyMethodDef kMethods[] = {
    {"_sgemm", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&entry<0>)),
     METH_FASTCALL,
     "_sgemm(fn, A, B, out): lt_sgemm at address fn on float32 C-contiguous arrays; the "
     "result, the library's non-zero return code, or None when the arguments need the general "
     "path (looptune/kernels.py)"},
    {"_sconv2d", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&entry<1>)),
     METH_FASTCALL, "_sconv2d(fn, X, W, out): as _sgemm, for lt_sconv2d"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_kernel_calls(py::module_ &m) {
    if (PyModule_AddFunctions(m.ptr(), kMethods) != 0) throw py::error_already_set();
    PyObject *type = PyType_FromSpec(&kKernelCallSpec);
    if (!type || PyModule_AddObject(m.ptr(), "KernelCall", type) != 0) {
        Py_XDECREF(type);
        throw py::error_already_set();
    }
}
