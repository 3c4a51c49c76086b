/* Calls driver entry points from a shared object of its own, so that the
 * driver sees this file's name as its caller (tests/caller_capability.rs
 * builds it as libcurand.so.10 and as libclient.so). Built without
 * optimisation and sibling calls, so that the call stays a call. */
typedef int (*attribute_fn)(int *, int, int);
typedef int (*capability_fn)(int *, int *, int);

int ptxvk_test_attribute(void *fn, int *value, int attribute, int device)
{
    int result = ((attribute_fn)fn)(value, attribute, device);
    return result;
}

int ptxvk_test_capability(void *fn, int *major, int *minor, int device)
{
    int result = ((capability_fn)fn)(major, minor, device);
    return result;
}
