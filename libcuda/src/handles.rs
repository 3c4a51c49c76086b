//! Opaque handles: `CUcontext`, `CUmodule`, `CUfunction` and `CUstream` are
//! the addresses of reference-counted objects that this library owns.
//!
//! A handle coming in from C is never dereferenced. It is a key: each kind of
//! object has a [`Registry`] of the live ones, and a handle that is not in the
//! registry of the expected kind (NULL, stale, of another kind, or garbage)
//! is rejected before anything touches it. That membership check is the type
//! tag the driver API's "invalid handle" errors need.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

/// Live objects of one kind, keyed by their handle value.
pub struct Registry<T> {
    live: Mutex<BTreeMap<usize, Arc<T>>>,
}

impl<T> Registry<T> {
    /// An empty registry (usable in a `static`).
    pub const fn new() -> Self {
        Registry { live: Mutex::new(BTreeMap::new()) }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<usize, Arc<T>>> {
        // A panic while the lock was held (caught at the C boundary) leaves a
        // map that is still consistent: each operation is a single insert or
        // remove.
        self.live.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers `obj` and returns its handle (the object's address).
    pub fn insert(&self, obj: Arc<T>) -> *mut c_void {
        let key = Arc::as_ptr(&obj) as usize;
        self.lock().insert(key, obj);
        key as *mut c_void
    }

    /// The live object behind `handle`, or `None` for anything else.
    pub fn get(&self, handle: *mut c_void) -> Option<Arc<T>> {
        self.lock().get(&(handle as usize)).cloned()
    }

    /// Unregisters `handle`; `None` if it was not live.
    pub fn remove(&self, handle: *mut c_void) -> Option<Arc<T>> {
        self.lock().remove(&(handle as usize))
    }

    /// Every live object with its handle.
    pub fn all(&self) -> Vec<(*mut c_void, Arc<T>)> {
        self.lock().iter().map(|(k, v)| (*k as *mut c_void, v.clone())).collect()
    }
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The handle value of a registered object (its address).
pub fn handle_of<T>(obj: &Arc<T>) -> *mut c_void {
    Arc::as_ptr(obj) as *mut c_void
}
