// The `looptune._core` functions behind looptune.aligned_arrays (numpy_alignment.cpp).
#pragma once

#include <pybind11/pybind11.h>

/// Adds _aligned_numpy_handler and _set_numpy_handler to the module.
void bind_numpy_alignment(pybind11::module_ &m);
