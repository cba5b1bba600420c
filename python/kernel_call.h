// The `looptune._core` functions behind looptune.load_library's calls (kernel_call.cpp).
#pragma once

#include <pybind11/pybind11.h>

/// Adds _sgemm, _sconv2d and the KernelCall type to the module.
void bind_kernel_calls(pybind11::module_ &m);
