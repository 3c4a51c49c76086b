//! libcuda shim (in progress).
