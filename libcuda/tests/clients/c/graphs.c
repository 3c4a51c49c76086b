/* CUDA graphs and stream capture through NVIDIA's cuda.h, linked with -lcuda
 * against ptxvk's libcuda.so.1 (run by test_c_programs.py).
 *
 *   cc -I<cuda include> graphs.c -L<libcuda dir> -lcuda -lpthread
 *   ./a.out <libcuda/tests/data>
 *
 * Builds a graph explicitly (memset, memcpy, kernel, host, empty, event and
 * child graph nodes) and the same work by stream capture across two streams
 * (fork and join through events), launches both several times with new
 * host inputs and changed kernel parameters (exec node updates, exec
 * update, disabled nodes), and checks every result of the real vadd_f32
 * kernel against the CPU on random inputs with poisoned outputs. Then the
 * documented errors: bad arguments, cycles, capture misuse (synchronising a
 * capturing stream, unsafe calls under each capture mode, the legacy
 * stream, unjoined forks, foreign events, ending elsewhere) and an event
 * query that sees pending work. One line per check; exits 1 on the first
 * failure.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RNG_SEED 0x2545F491u
#include "check.h"

#define N 1000u
#define POISON 0xFFC0DEADu


static float a[N], b[N], out[N];
static CUfunction vadd;
static CUdeviceptr da, db, dc, dd;

static void fill_inputs(void) {
    for (unsigned i = 0; i < N; i++) {
        a[i] = next_float();
        b[i] = next_float();
    }
}

static void poison_host(void) {
    for (unsigned i = 0; i < N; i++) {
        uint32_t p = POISON;
        memcpy(&out[i], &p, 4);
    }
}

static int is_poison(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    return u == POISON;
}

/* out[i] == a[i] + 2 b[i] for i < n (the chain c = a + b, d = c + b);
 * `rest` says what lies beyond n: 1 poison, 0 unchecked. */
static int check_chain(unsigned n, int rest) {
    for (unsigned i = 0; i < N; i++) {
        if (i < n) {
            float c = a[i] + b[i];
            float want = c + b[i];
            if (out[i] != want) {
                printf("  out[%u] = %g, want %g\n", i, out[i], want);
                return 0;
            }
        } else if (rest && !is_poison(out[i])) {
            printf("  out[%u] = %g, want the poison\n", i, out[i]);
            return 0;
        }
    }
    return 1;
}

static int host_calls;
static void CUDA_CB count_host(void *p) {
    (*(int *)p)++;
}

/* A host-to-device or device-to-host linear copy for a memcpy node. */
static CUDA_MEMCPY3D linear_copy(CUmemorytype dst_type, void *dst_host, CUdeviceptr dst_dev, CUmemorytype src_type,
                                 const void *src_host, CUdeviceptr src_dev, size_t bytes) {
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.dstMemoryType = dst_type;
    c.dstHost = dst_host;
    c.dstDevice = dst_dev;
    c.srcMemoryType = src_type;
    c.srcHost = src_host;
    c.srcDevice = src_dev;
    c.WidthInBytes = bytes;
    c.Height = 1;
    c.Depth = 1;
    return c;
}

static CUDA_KERNEL_NODE_PARAMS vadd_params(void **args) {
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = vadd;
    p.gridDimX = (N + 127) / 128;
    p.gridDimY = 1;
    p.gridDimZ = 1;
    p.blockDimX = 128;
    p.blockDimY = 1;
    p.blockDimZ = 1;
    p.kernelParams = args;
    return p;
}

static size_t count_nodes(CUgraph g) {
    size_t n = 0;
    OK(cuGraphGetNodes(g, NULL, &n));
    return n;
}

/* Launches `exec` on `s` with fresh inputs and checks the chain over `n`. */
static void launch_and_check(CUgraphExec exec, CUstream s, unsigned n, const char *what) {
    fill_inputs();
    poison_host();
    OK(cuMemsetD32(dd, POISON, N));
    int calls = host_calls;
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    CHECK(check_chain(n, n < N) && host_calls == calls + 1, what);
}

static void explicit_graph(CUstream s) {
    CUgraph g = NULL, bad = NULL;
    EXPECT(cuGraphCreate(&bad, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphCreate(&g, 0));

    /* memset dc to poison, copy a and b in (read from the host arrays when
     * the graph runs), c = a + b, d = c + b, copy d out, count on the host. */
    CUgraphNode ms, ca, cb, k1, k2, cout, host;
    CUDA_MEMSET_NODE_PARAMS mp = {.dst = dc, .pitch = 0, .value = POISON, .elementSize = 4, .width = N, .height = 1};
    OK(cuGraphAddMemsetNode(&ms, g, NULL, 0, &mp, NULL));
    CUDA_MEMCPY3D cpa = linear_copy(CU_MEMORYTYPE_DEVICE, NULL, da, CU_MEMORYTYPE_HOST, a, 0, sizeof a);
    CUDA_MEMCPY3D cpb = linear_copy(CU_MEMORYTYPE_DEVICE, NULL, db, CU_MEMORYTYPE_HOST, b, 0, sizeof b);
    OK(cuGraphAddMemcpyNode(&ca, g, NULL, 0, &cpa, NULL));
    OK(cuGraphAddMemcpyNode(&cb, g, NULL, 0, &cpb, NULL));
    CUgraphNode first[] = {ms, ca, cb};
    CUdeviceptr pa = da, pb = db, pc = dc;
    unsigned n = N;
    void *args1[] = {&pa, &pb, &pc, &n};
    CUDA_KERNEL_NODE_PARAMS kp = vadd_params(args1);
    OK(cuGraphAddKernelNode(&k1, g, first, 3, &kp));
    /* The values were copied: changing the variables now changes nothing. */
    pa = pc = 0;
    n = 7;
    CUdeviceptr qa = dc, qb = db, qc = dd;
    unsigned n2 = N;
    void *args2[] = {&qa, &qb, &qc, &n2};
    kp = vadd_params(args2);
    OK(cuGraphAddKernelNode(&k2, g, &k1, 1, &kp));
    qa = 0;
    CUDA_MEMCPY3D cpo = linear_copy(CU_MEMORYTYPE_HOST, out, 0, CU_MEMORYTYPE_DEVICE, NULL, dd, sizeof out);
    OK(cuGraphAddMemcpyNode(&cout, g, &k2, 1, &cpo, NULL));
    CUDA_HOST_NODE_PARAMS hp = {.fn = count_host, .userData = &host_calls};
    OK(cuGraphAddHostNode(&host, g, &cout, 1, &hp));

    /* Structure queries. */
    CHECK(count_nodes(g) == 7, "graph has 7 nodes");
    CUgraphNode roots[8];
    size_t nroots = 8;
    OK(cuGraphGetRootNodes(g, roots, &nroots));
    CHECK(nroots == 3 && roots[0] == ms && roots[1] == ca && roots[2] == cb, "root nodes are the memset and copies in");
    size_t nedges = 0;
    OK(cuGraphGetEdges(g, NULL, NULL, NULL, &nedges));
    CHECK(nedges == 6, "graph has 6 edges");
    CUgraphNode from[6], to[6];
    CUgraphEdgeData ed[6];
    OK(cuGraphGetEdges(g, from, to, ed, &nedges));
    CHECK(nedges == 6 && from[3] == k1 && to[3] == k2 && ed[3].type == 0, "edges listed with default edge data");
    CUgraphNode deps[4];
    size_t ndeps = 4;
    OK(cuGraphNodeGetDependencies(k1, deps, NULL, &ndeps));
    CHECK(ndeps == 3 && deps[0] == ms, "kernel node depends on the three first nodes");
    ndeps = 4;
    OK(cuGraphNodeGetDependentNodes(k1, deps, NULL, &ndeps));
    CHECK(ndeps == 1 && deps[0] == k2, "second kernel depends on the first");
    CUgraphNodeType ty;
    OK(cuGraphNodeGetType(ms, &ty));
    CHECK(ty == CU_GRAPH_NODE_TYPE_MEMSET, "memset node type");
    OK(cuGraphNodeGetType(ca, &ty));
    CHECK(ty == CU_GRAPH_NODE_TYPE_MEMCPY, "memcpy node type");
    OK(cuGraphNodeGetType(k1, &ty));
    CHECK(ty == CU_GRAPH_NODE_TYPE_KERNEL, "kernel node type");
    OK(cuGraphNodeGetType(host, &ty));
    CHECK(ty == CU_GRAPH_NODE_TYPE_HOST, "host node type");
    CUDA_KERNEL_NODE_PARAMS got;
    OK(cuGraphKernelNodeGetParams(k1, &got));
    CHECK(got.func == vadd && got.gridDimX == (N + 127) / 128 && got.blockDimX == 128 &&
              *(CUdeviceptr *)got.kernelParams[0] == da && *(CUdeviceptr *)got.kernelParams[2] == dc &&
              *(unsigned *)got.kernelParams[3] == N,
          "kernel node parameters are the copies taken when it was added");
    CUDA_MEMSET_NODE_PARAMS mgot;
    OK(cuGraphMemsetNodeGetParams(ms, &mgot));
    CHECK(mgot.dst == dc && mgot.value == POISON && mgot.width == N && mgot.elementSize == 4, "memset node parameters");
    CUDA_HOST_NODE_PARAMS hgot;
    OK(cuGraphHostNodeGetParams(host, &hgot));
    CHECK(hgot.fn == count_host && hgot.userData == &host_calls, "host node parameters");

    /* Kernel node attributes are recorded; clusters are refused. */
    CUkernelNodeAttrValue av;
    memset(&av, 0, sizeof av);
    av.priority = 0;
    OK(cuGraphKernelNodeSetAttribute(k1, CU_LAUNCH_ATTRIBUTE_PRIORITY, &av));
    av.cooperative = 1;
    OK(cuGraphKernelNodeSetAttribute(k1, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &av));
    CUkernelNodeAttrValue aget;
    memset(&aget, 0xFF, sizeof aget);
    OK(cuGraphKernelNodeCopyAttributes(k2, k1));
    OK(cuGraphKernelNodeGetAttribute(k2, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &aget));
    CHECK(aget.cooperative == 1, "kernel node attribute copied and read back");
    memset(&av, 0, sizeof av);
    av.clusterDim.x = 2;
    av.clusterDim.y = av.clusterDim.z = 1;
    EXPECT(cuGraphKernelNodeSetAttribute(k1, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &av), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT(cuGraphKernelNodeGetAttribute(ms, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &aget), CUDA_ERROR_INVALID_VALUE);

    /* Run it three times with new inputs each time. */
    CUgraphExec exec;
    OK(cuGraphInstantiate(&exec, g, 0));
    for (int r = 0; r < 3; r++)
        launch_and_check(exec, s, N, "explicit graph launch computes a + 2b");

    /* Work queued before and after a launch keeps stream order. */
    fill_inputs();
    poison_host();
    OK(cuMemsetD32Async(dd, 0, N, s));
    OK(cuGraphLaunch(exec, s));
    OK(cuMemsetD32Async(dd, POISON, N, s));
    float after[N];
    OK(cuMemcpyDtoHAsync(after, dd, sizeof after, s));
    OK(cuStreamSynchronize(s));
    CHECK(check_chain(N, 0) && is_poison(after[0]) && is_poison(after[N - 1]), "graph launch is ordered in its stream");

    /* Change the second kernel's n in the executable graph only. */
    unsigned half = N / 2;
    CUdeviceptr ra = dc, rb = db, rc = dd;
    void *args3[] = {&ra, &rb, &rc, &half};
    kp = vadd_params(args3);
    OK(cuGraphExecKernelNodeSetParams(exec, k2, &kp));
    launch_and_check(exec, s, N / 2, "exec kernel node update: only the first half is written");
    OK(cuGraphKernelNodeGetParams(k2, &got));
    CHECK(*(unsigned *)got.kernelParams[3] == N, "the graph itself keeps its parameters");

    /* Change it in the graph, then bring the executable graph up to date. */
    unsigned quarter = N / 4;
    void *args4[] = {&ra, &rb, &rc, &quarter};
    kp = vadd_params(args4);
    OK(cuGraphKernelNodeSetParams(k2, &kp));
    CUgraphExecUpdateResultInfo info;
    OK(cuGraphExecUpdate(exec, g, &info));
    CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS, "exec update succeeds for the same topology");
    launch_and_check(exec, s, N / 4, "exec update: a quarter is written");

    /* Disable the copy in: the device keeps the previous inputs. */
    OK(cuGraphNodeSetEnabled(exec, ca, 0));
    unsigned en = 1;
    OK(cuGraphNodeGetEnabled(exec, ca, &en));
    CHECK(en == 0, "node disabled");
    float keep_a[N];
    memcpy(keep_a, a, sizeof a);
    fill_inputs();
    poison_host();
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    int ok = 1;
    for (unsigned i = 0; i < N / 4; i++)
        ok &= out[i] == (keep_a[i] + b[i]) + b[i];
    CHECK(ok, "disabled memcpy node is skipped");
    OK(cuGraphNodeSetEnabled(exec, ca, 1));
    EXPECT(cuGraphNodeSetEnabled(exec, host, 0), CUDA_ERROR_INVALID_VALUE);

    /* A topology change cannot update. */
    CUgraphNode extra;
    OK(cuGraphAddEmptyNode(&extra, g, &host, 1));
    EXPECT(cuGraphExecUpdate(exec, g, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, "topology change reported");
    OK(cuGraphDestroyNode(extra));
    CHECK(count_nodes(g) == 7, "destroyed node is gone");

    /* Clone and a child graph node: parent runs the clone after an empty node. */
    CUgraph clone, parent;
    OK(cuGraphClone(&clone, g));
    CUgraphNode k2c;
    OK(cuGraphNodeFindInClone(&k2c, k2, clone));
    OK(cuGraphNodeGetType(k2c, &ty));
    CHECK(ty == CU_GRAPH_NODE_TYPE_KERNEL && k2c != k2, "node found in clone");
    EXPECT(cuGraphNodeFindInClone(&k2c, k2, parent = NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphCreate(&parent, 0));
    CUgraphNode e0, child;
    OK(cuGraphAddEmptyNode(&e0, parent, NULL, 0));
    OK(cuGraphAddChildGraphNode(&child, parent, &e0, 1, clone));
    OK(cuGraphDestroy(clone)); /* the node owns its own copy */
    CUgraph embedded;
    OK(cuGraphChildGraphNodeGetGraph(child, &embedded));
    CHECK(count_nodes(embedded) == 7, "child graph node embeds a copy");
    CUgraphExec pexec;
    OK(cuGraphInstantiate(&pexec, parent, 0));
    launch_and_check(pexec, s, N / 4, "child graph node runs the embedded graph");
    /* Update the executable child from the graph (its second kernel back to
     * all of n), through the child node and through cuGraphExecUpdate. */
    unsigned full = N;
    void *args6[] = {&ra, &rb, &rc, &full};
    kp = vadd_params(args6);
    OK(cuGraphKernelNodeSetParams(k2, &kp));
    OK(cuGraphExecChildGraphNodeSetParams(pexec, child, g));
    launch_and_check(pexec, s, N, "exec child graph node takes the graph's parameters");
    void *args7[] = {&ra, &rb, &rc, &half};
    kp = vadd_params(args7);
    CUgraphNode enodes[7];
    size_t nen = 7;
    OK(cuGraphGetNodes(embedded, enodes, &nen)); /* creation order: the second kernel is the fifth */
    OK(cuGraphNodeGetType(enodes[4], &ty));
    CHECK(nen == 7 && ty == CU_GRAPH_NODE_TYPE_KERNEL, "embedded graph keeps the creation order");
    OK(cuGraphKernelNodeSetParams(enodes[4], &kp));
    OK(cuGraphExecUpdate(pexec, parent, &info));
    launch_and_check(pexec, s, N / 2, "exec update reaches into child graphs");
    CUgraph lone;
    OK(cuGraphCreate(&lone, 0));
    EXPECT(cuGraphExecChildGraphNodeSetParams(pexec, child, lone), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphDestroy(lone));
    OK(cuGraphExecDestroy(pexec));
    OK(cuGraphDestroy(parent));

    /* Event record node: the event completes with the graph. */
    CUevent ev;
    OK(cuEventCreate(&ev, 0));
    CUgraph eg;
    CUgraphNode er;
    OK(cuGraphCreate(&eg, 0));
    OK(cuGraphAddEventRecordNode(&er, eg, NULL, 0, ev));
    CUevent evgot;
    OK(cuGraphEventRecordNodeGetEvent(er, &evgot));
    CHECK(evgot == ev, "event record node event");
    CUgraphExec eexec;
    OK(cuGraphInstantiate(&eexec, eg, 0));
    OK(cuGraphLaunch(eexec, s));
    OK(cuEventSynchronize(ev));
    OK(cuEventQuery(ev));
    OK(cuGraphExecDestroy(eexec));
    OK(cuGraphDestroy(eg));
    OK(cuEventDestroy(ev));

    /* Errors. */
    EXPECT(cuGraphAddKernelNode(&extra, g, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphAddKernelNode(&extra, NULL, NULL, 0, &kp), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphAddEmptyNode(&extra, g, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CUgraphNode twice[] = {k1, k1};
    EXPECT(cuGraphAddEmptyNode(&extra, g, twice, 2), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphAddDependencies(g, &k1, &k2, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphAddDependencies(g, &k1, &k1, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphRemoveDependencies(g, &k2, &k1, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMSET_NODE_PARAMS badm = mp;
    badm.elementSize = 3;
    EXPECT(cuGraphAddMemsetNode(&extra, g, NULL, 0, &badm, NULL), CUDA_ERROR_INVALID_VALUE);
    CUDA_HOST_NODE_PARAMS badh = {.fn = NULL, .userData = NULL};
    EXPECT(cuGraphAddHostNode(&extra, g, NULL, 0, &badh), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphKernelNodeGetParams(ms, &got), CUDA_ERROR_INVALID_VALUE);
    unsigned zero_grid_n = N;
    void *args5[] = {&ra, &rb, &rc, &zero_grid_n};
    kp = vadd_params(args5);
    kp.gridDimX = 0;
    EXPECT(cuGraphAddKernelNode(&extra, g, NULL, 0, &kp), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphNodeGetType(NULL, &ty), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphLaunch(NULL, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuGraphInstantiate(NULL, g, 0), CUDA_ERROR_INVALID_VALUE);
    /* A node of another graph cannot be a dependency. */
    CUgraph other;
    CUgraphNode o1;
    OK(cuGraphCreate(&other, 0));
    EXPECT(cuGraphAddEmptyNode(&o1, other, &k1, 1), CUDA_ERROR_INVALID_VALUE);
    /* A cycle is reported by instantiation. */
    CUgraphNode c1, c2, c3;
    OK(cuGraphAddEmptyNode(&c1, other, NULL, 0));
    OK(cuGraphAddEmptyNode(&c2, other, &c1, 1));
    OK(cuGraphAddEmptyNode(&c3, other, &c2, 1));
    OK(cuGraphAddDependencies(other, &c3, &c1, NULL, 1));
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    memset(&ip, 0, sizeof ip);
    CUgraphExec cyc = NULL;
    CUresult r = cuGraphInstantiateWithParams(&cyc, other, &ip);
    CHECK(r != CUDA_SUCCESS && ip.result_out == CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE && ip.hErrNode_out != NULL,
          "a cycle fails instantiation with INVALID_STRUCTURE");
    OK(cuGraphRemoveDependencies(other, &c3, &c1, NULL, 1));
    memset(&ip, 0, sizeof ip);
    OK(cuGraphInstantiateWithParams(&cyc, other, &ip));
    CHECK(ip.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS, "instantiates once the cycle is gone");
    OK(cuGraphExecDestroy(cyc));
    OK(cuGraphDestroy(other));

    OK(cuGraphExecDestroy(exec));
    EXPECT(cuGraphExecDestroy(exec), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphDestroy(g));
    EXPECT(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
}

static void captured_graph(CUstream s, CUstream s2) {
    CUstreamCaptureStatus st;
    OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "not capturing yet");
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "capturing");
    cuuint64_t id = 0;
    CUgraph cg = NULL;
    const CUgraphNode *cdeps = NULL;
    size_t ncdeps = 99;
    OK(cuStreamGetCaptureInfo(s, &st, &id, &cg, &cdeps, NULL, &ncdeps));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id != 0 && cg != NULL && ncdeps == 0, "capture info at the start");

    poison_host();
    int calls = host_calls;
    OK(cuMemsetD32Async(dc, POISON, N, s));
    OK(cuMemcpyHtoDAsync(da, a, sizeof a, s));
    OK(cuMemcpyHtoDAsync(db, b, sizeof b, s));
    CUdeviceptr pa = da, pb = db, pc = dc;
    unsigned n = N;
    void *args1[] = {&pa, &pb, &pc, &n};
    OK(cuLaunchKernel(vadd, (N + 127) / 128, 1, 1, 128, 1, 1, 0, s, args1, NULL));
    pa = pc = 0; /* the capture copied the values */
    n = 3;
    OK(cuStreamGetCaptureInfo(s, &st, &id, &cg, &cdeps, NULL, &ncdeps));
    CHECK(ncdeps == 1, "one dependency after the launch");
    CUgraphNode k1 = cdeps[0];

    /* Fork to s2, run the second kernel there, join back. */
    CUevent fork, join;
    OK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    OK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    OK(cuEventRecord(fork, s));
    EXPECT(cuEventQuery(fork), CUDA_ERROR_CAPTURED_EVENT);
    OK(cuStreamWaitEvent(s2, fork, 0));
    OK(cuStreamIsCapturing(s2, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "forked stream joined the capture");
    CUdeviceptr qa = dc, qb = db, qc = dd;
    unsigned n2 = N;
    void *args2[] = {&qa, &qb, &qc, &n2};
    OK(cuLaunchKernel(vadd, (N + 127) / 128, 1, 1, 128, 1, 1, 0, s2, args2, NULL));
    OK(cuEventRecord(join, s2));
    OK(cuStreamWaitEvent(s, join, 0));
    OK(cuStreamGetCaptureInfo(s, &st, &id, &cg, &cdeps, NULL, &ncdeps));
    CHECK(ncdeps == 2, "join merges the dependency sets");
    OK(cuMemcpyDtoHAsync(out, dd, sizeof out, s));
    OK(cuLaunchHostFunc(s, count_host, &host_calls));
    CHECK(is_poison(out[0]) && host_calls == calls, "nothing ran during the capture");
    EXPECT(cuStreamEndCapture(s2, &cg), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    CUgraph g = NULL;
    OK(cuStreamEndCapture(s, &g));
    CHECK(g != NULL, "capture produced a graph");
    OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "capture ended");
    OK(cuStreamIsCapturing(s2, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "forked stream left the capture");

    CHECK(count_nodes(g) == 7, "captured graph has 7 nodes");
    size_t nedges = 0;
    OK(cuGraphGetEdges(g, NULL, NULL, NULL, &nedges));
    CHECK(nedges == 7, "captured graph has 7 edges");
    size_t nroots = 0;
    OK(cuGraphGetRootNodes(g, NULL, &nroots));
    CHECK(nroots == 1, "captured graph has one root");
    CUgraphNode dep[4];
    size_t ndep = 4;
    OK(cuGraphNodeGetDependentNodes(k1, dep, NULL, &ndep));
    CHECK(ndep == 2, "first kernel feeds the forked kernel and the copy out");

    CUgraphExec exec;
    OK(cuGraphInstantiate(&exec, g, 0));
    for (int r = 0; r < 3; r++)
        launch_and_check(exec, s, N, "captured graph launch computes a + 2b");
    /* Launch on another stream, too. */
    launch_and_check(exec, s2, N, "captured graph launched on the other stream");

    /* Capturing a graph launch makes a child graph node. */
    OK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuGraphLaunch(exec, s2));
    CUgraph g2;
    OK(cuStreamEndCapture(s2, &g2));
    CUgraphNode only;
    size_t one = 1;
    OK(cuGraphGetNodes(g2, &only, &one));
    CUgraphNodeType ty;
    OK(cuGraphNodeGetType(only, &ty));
    CHECK(one == 1 && ty == CU_GRAPH_NODE_TYPE_GRAPH, "captured graph launch is a child graph node");
    CUgraphExec exec2;
    OK(cuGraphInstantiate(&exec2, g2, 0));
    launch_and_check(exec2, s, N, "graph of a captured graph launch");
    OK(cuGraphExecDestroy(exec2));
    OK(cuGraphDestroy(g2));

    OK(cuGraphExecDestroy(exec));

    /* Capture into an existing graph after a given node, and set the
     * dependency set by hand. */
    CUgraph into;
    CUgraphNode start, other;
    OK(cuGraphCreate(&into, 0));
    OK(cuGraphAddEmptyNode(&start, into, NULL, 0));
    OK(cuGraphAddEmptyNode(&other, into, NULL, 0));
    EXPECT(cuStreamBeginCaptureToGraph(s, into, &k1, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamBeginCaptureToGraph(s, into, &start, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuStreamUpdateCaptureDependencies(s, &other, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    OK(cuStreamGetCaptureInfo(s, &st, &id, &cg, &cdeps, NULL, &ncdeps));
    CHECK(cg == into && ncdeps == 2, "capture into a graph after two nodes");
    OK(cuMemsetD32Async(dd, 0, N, s));
    CUgraph ended;
    OK(cuStreamEndCapture(s, &ended));
    CHECK(ended == into && count_nodes(into) == 3, "the capture added to the given graph");
    size_t nd = 0;
    OK(cuGraphGetEdges(into, NULL, NULL, NULL, &nd));
    CHECK(nd == 2, "the captured memset depends on both nodes");
    EXPECT(cuStreamUpdateCaptureDependencies(s, &other, NULL, 1, 0), CUDA_ERROR_ILLEGAL_STATE);
    OK(cuGraphDebugDotPrint(g, "/dev/null", 0));
    EXPECT(cuGraphDebugDotPrint(g, "/nonexistent/dir/graph.dot", 0), CUDA_ERROR_OPERATING_SYSTEM);
    OK(cuGraphDestroy(into));
    OK(cuGraphDestroy(g));
    OK(cuEventDestroy(fork));
    OK(cuEventDestroy(join));
}

static void capture_errors(CUstream s, CUstream s2) {
    CUgraph g = (CUgraph)0x1;
    CUstreamCaptureStatus st;
    unsigned n = N;
    void *args[] = {&da, &db, &dc, &n};

    EXPECT(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT(cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT(cuStreamBeginCapture(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    EXPECT(cuStreamIsCapturing(s, NULL), CUDA_ERROR_INVALID_VALUE);

    /* Synchronising a capturing stream invalidates the capture. */
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    OK(cuLaunchKernel(vadd, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
    EXPECT(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED, "capture invalidated");
    EXPECT(cuLaunchKernel(vadd, 1, 1, 1, 32, 1, 1, 0, s, args, NULL), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    EXPECT(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(g == NULL, "invalidated capture returns no graph");

    /* Global mode: unsafe calls of any thread are refused. */
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUdeviceptr tmp;
    EXPECT(cuMemAlloc(&tmp, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT(cuMemcpyHtoD(da, a, sizeof a), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    /* Relaxed mode on a non-blocking stream: allocation and synchronous
     * copies are allowed and run at once. */
    OK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(cuMemAlloc(&tmp, 64));
    uint32_t word = 0x12345678u, back = 0;
    OK(cuMemcpyHtoD(tmp, &word, 4));
    OK(cuMemcpyDtoH(&back, tmp, 4));
    OK(cuMemFree(tmp));
    CHECK(back == word, "relaxed capture allows synchronous copies");
    OK(cuMemsetD32Async(dc, 0, N, s2));
    OK(cuStreamEndCapture(s2, &g));
    CHECK(g != NULL && count_nodes(g) == 1, "relaxed capture recorded the memset only");
    OK(cuGraphDestroy(g));

    /* This thread's mode: relaxed lets it make unsafe calls during a global capture. */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    CHECK(mode == CU_STREAM_CAPTURE_MODE_GLOBAL, "threads start in global mode");
    OK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuMemAlloc(&tmp, 64));
    OK(cuMemFree(tmp));
    OK(cuStreamEndCapture(s2, &g));
    OK(cuGraphDestroy(g));
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    CHECK(mode == CU_STREAM_CAPTURE_MODE_RELAXED, "mode swapped back");
    mode = (CUstreamCaptureMode)9;
    EXPECT(cuThreadExchangeStreamCaptureMode(&mode), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuThreadExchangeStreamCaptureMode(NULL), CUDA_ERROR_INVALID_VALUE);

    /* The legacy stream while a blocking stream captures. */
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    EXPECT(cuStreamIsCapturing(CU_STREAM_LEGACY, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    EXPECT(cuMemsetD32Async(dc, 0, N, NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    EXPECT(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* ... but not while only a non-blocking one does. */
    OK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(cuMemsetD32Async(dc, 0, N, NULL));
    OK(cuStreamEndCapture(s2, &g));
    CHECK(count_nodes(g) == 0, "legacy stream work was not captured");
    OK(cuGraphDestroy(g));

    /* A fork that is not joined back. */
    CUevent e, outside;
    OK(cuEventCreate(&e, 0));
    OK(cuEventCreate(&outside, 0));
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuEventRecord(e, s));
    OK(cuStreamWaitEvent(s2, e, 0));
    OK(cuLaunchKernel(vadd, 1, 1, 1, 32, 1, 1, 0, s2, args, NULL));
    EXPECT(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    OK(cuStreamIsCapturing(s2, &st));
    CHECK(g == NULL && st == CU_STREAM_CAPTURE_STATUS_NONE, "unjoined capture ended without a graph");

    /* Waiting for an event recorded outside the capture. */
    OK(cuEventRecord(outside, s2));
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT(cuStreamWaitEvent(s, outside, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    EXPECT(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* ... unless as an external wait node. */
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuStreamWaitEvent(s, outside, CU_EVENT_WAIT_EXTERNAL));
    OK(cuEventRecordWithFlags(outside, s, CU_EVENT_RECORD_EXTERNAL));
    OK(cuStreamEndCapture(s, &g));
    CUgraphNode nodes[2];
    size_t two = 2;
    CUgraphNodeType t0, t1;
    OK(cuGraphGetNodes(g, nodes, &two));
    OK(cuGraphNodeGetType(nodes[0], &t0));
    OK(cuGraphNodeGetType(nodes[1], &t1));
    CHECK(two == 2 && t0 == CU_GRAPH_NODE_TYPE_WAIT_EVENT && t1 == CU_GRAPH_NODE_TYPE_EVENT_RECORD,
          "external event wait and record nodes");
    OK(cuGraphDestroy(g));
    OK(cuEventDestroy(e));
    OK(cuEventDestroy(outside));

    /* A forked stream destroyed during the capture: its joined work stays
     * in the graph; unjoined work still fails the capture. */
    CUstream fs;
    CUevent fe, je;
    OK(cuEventCreate(&fe, CU_EVENT_DISABLE_TIMING));
    OK(cuEventCreate(&je, CU_EVENT_DISABLE_TIMING));
    for (int joined = 1; joined >= 0; joined--) {
        OK(cuStreamCreate(&fs, CU_STREAM_DEFAULT));
        OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        OK(cuEventRecord(fe, s));
        OK(cuStreamWaitEvent(fs, fe, 0));
        OK(cuMemsetD32Async(dc, 0, N, fs));
        if (joined) {
            OK(cuEventRecord(je, fs));
            OK(cuStreamWaitEvent(s, je, 0));
        }
        OK(cuStreamDestroy(fs));
        if (joined) {
            OK(cuStreamEndCapture(s, &g));
            CHECK(count_nodes(g) == 1, "a destroyed forked stream's joined work stays captured");
            OK(cuGraphDestroy(g));
        } else {
            EXPECT(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
        }
    }
    OK(cuEventDestroy(fe));
    OK(cuEventDestroy(je));

    /* The per-thread default stream can be captured; it is each thread's
     * own stream. */
    OK(cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    OK(cuStreamIsCapturing(CU_STREAM_PER_THREAD, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "per-thread default stream captures");
    OK(cuMemsetD32Async(dc, 0, N, CU_STREAM_PER_THREAD));
    OK(cuLaunchKernel(vadd, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_PER_THREAD, args, NULL));
    OK(cuStreamEndCapture(CU_STREAM_PER_THREAD, &g));
    CHECK(count_nodes(g) == 2, "per-thread default stream capture has both nodes");
    OK(cuGraphDestroy(g));

    /* Destroying the stream of a capture ends it: unsafe calls work again. */
    CUstream s3;
    OK(cuStreamCreate(&s3, CU_STREAM_DEFAULT));
    OK(cuStreamBeginCapture(s3, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuStreamDestroy(s3));
    OK(cuMemcpyHtoD(da, a, sizeof a));
    OK(cuCtxSynchronize());
}

/* The generic node API (cuGraphAddNode, cuGraphNodeGet/SetParams,
 * cuGraphExecNodeSetParams): memset, copies and a kernel. */
static void generic_nodes(CUstream s) {
    CUgraph g;
    OK(cuGraphCreate(&g, 0));
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_MEMSET;
    p.memset.dst = dc;
    p.memset.value = POISON;
    p.memset.elementSize = 4;
    p.memset.width = N;
    p.memset.height = 1;
    CUgraphNode ms, ca, cb, k, co;
    OK(cuGraphAddNode(&ms, g, NULL, NULL, 0, &p));
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    p.memcpy.copyParams = linear_copy(CU_MEMORYTYPE_DEVICE, NULL, da, CU_MEMORYTYPE_HOST, a, 0, sizeof a);
    OK(cuGraphAddNode(&ca, g, &ms, NULL, 1, &p));
    p.memcpy.copyParams = linear_copy(CU_MEMORYTYPE_DEVICE, NULL, db, CU_MEMORYTYPE_HOST, b, 0, sizeof b);
    OK(cuGraphAddNode(&cb, g, &ca, NULL, 1, &p));
    CUdeviceptr pa = dc, pb = db, pc = dd;
    unsigned n = N;
    void *args[] = {&pa, &pb, &pc, &n};
    /* d = c + b with c the poison: a NaN result proves the memset ran first;
     * then a set-params to c = a + b ... */
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_KERNEL;
    p.kernel.func = vadd;
    p.kernel.gridDimX = (N + 127) / 128;
    p.kernel.gridDimY = p.kernel.gridDimZ = 1;
    p.kernel.blockDimX = 128;
    p.kernel.blockDimY = p.kernel.blockDimZ = 1;
    p.kernel.kernelParams = args;
    OK(cuGraphAddNode(&k, g, &cb, NULL, 1, &p));
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    p.memcpy.copyParams = linear_copy(CU_MEMORYTYPE_HOST, out, 0, CU_MEMORYTYPE_DEVICE, NULL, dd, sizeof out);
    OK(cuGraphAddNode(&co, g, &k, NULL, 1, &p));
    CUgraphNodeParams got;
    OK(cuGraphNodeGetParams(k, &got));
    CHECK(got.type == CU_GRAPH_NODE_TYPE_KERNEL && got.kernel.func == vadd &&
              *(CUdeviceptr *)got.kernel.kernelParams[0] == dc && *(unsigned *)got.kernel.kernelParams[3] == N,
          "generic kernel node parameters");
    OK(cuGraphNodeGetParams(ms, &got));
    CHECK(got.type == CU_GRAPH_NODE_TYPE_MEMSET && got.memset.value == POISON, "generic memset node parameters");
    CUgraphExec exec;
    OK(cuGraphInstantiate(&exec, g, 0));
    fill_inputs();
    poison_host();
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    int nan = 1;
    for (unsigned i = 0; i < N; i++)
        nan &= out[i] != out[i];
    CHECK(nan, "generic graph: the kernel read the poisoned c");
    /* Exec: the kernel reads a instead of c, and only the first half. */
    pa = da;
    n = N / 2;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_KERNEL;
    p.kernel.func = vadd;
    p.kernel.gridDimX = (N + 127) / 128;
    p.kernel.gridDimY = p.kernel.gridDimZ = 1;
    p.kernel.blockDimX = 128;
    p.kernel.blockDimY = p.kernel.blockDimZ = 1;
    p.kernel.kernelParams = args;
    OK(cuGraphExecNodeSetParams(exec, k, &p));
    fill_inputs();
    poison_host();
    OK(cuMemsetD32(dd, POISON, N));
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    int good = 1;
    for (unsigned i = 0; i < N; i++)
        good &= i < N / 2 ? out[i] == a[i] + b[i] : is_poison(out[i]);
    CHECK(good, "generic exec node params: c = a + b over the first half");
    /* Graph-level set: all of it. */
    n = N;
    OK(cuGraphNodeSetParams(k, &p));
    p.type = CU_GRAPH_NODE_TYPE_MEMSET;
    EXPECT(cuGraphNodeSetParams(k, &p), CUDA_ERROR_INVALID_VALUE);
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    EXPECT(cuGraphAddNode(&k, g, NULL, NULL, 0, &p), CUDA_ERROR_NOT_SUPPORTED);
    p.type = CU_GRAPH_NODE_TYPE_EMPTY;
    p.reserved0[1] = 1;
    EXPECT(cuGraphAddNode(&k, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphInstantiate(&exec, g, 0));
    fill_inputs();
    poison_host();
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    good = 1;
    for (unsigned i = 0; i < N; i++)
        good &= out[i] == a[i] + b[i];
    CHECK(good, "generic graph set params: c = a + b everywhere");
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(g));
}

/* Another thread during this thread's captures. */
struct other_args {
    CUcontext ctx;
    CUstream s;
    CUresult alloc, end, ptds_begin, ptds_end;
    CUstreamCaptureMode mode;
};

static void *other_thread(void *p) {
    struct other_args *o = p;
    cuCtxSetCurrent(o->ctx);
    CUstreamCaptureMode m = o->mode;
    cuThreadExchangeStreamCaptureMode(&m);
    CUdeviceptr tmp = 0;
    o->alloc = cuMemAlloc(&tmp, 64);
    if (o->alloc == CUDA_SUCCESS)
        cuMemFree(tmp);
    CUgraph g = NULL;
    o->end = cuStreamEndCapture(o->s, &g);
    if (o->end == CUDA_SUCCESS)
        cuGraphDestroy(g);
    /* This thread's per-thread stream is not the other thread's. */
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    o->ptds_begin = cuStreamIsCapturing(CU_STREAM_PER_THREAD, &st);
    if (st != CU_STREAM_CAPTURE_STATUS_NONE)
        o->ptds_begin = CUDA_ERROR_UNKNOWN;
    o->ptds_end = cuStreamEndCapture(CU_STREAM_PER_THREAD, &g);
    return NULL;
}

static void capture_threads(CUcontext ctx, CUstream s2) {
    CUgraph g;
    pthread_t th;
    struct other_args o = {.ctx = ctx, .s = s2, .mode = CU_STREAM_CAPTURE_MODE_GLOBAL};
    /* A global capture here: the other thread (global mode) may not allocate,
     * nor end this thread's capture. */
    OK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_RELAXED));
    pthread_create(&th, NULL, other_thread, &o);
    pthread_join(th, NULL);
    CHECK(o.alloc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "another thread's unsafe call during a global capture");
    CHECK(o.end == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "a global capture ends on its own thread");
    CHECK(o.ptds_begin == CUDA_SUCCESS && o.ptds_end == CUDA_ERROR_ILLEGAL_STATE,
          "per-thread default streams are per thread");
    EXPECT(cuStreamEndCapture(s2, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamEndCapture(CU_STREAM_PER_THREAD, &g));
    OK(cuGraphDestroy(g));
    /* The same with the other thread in thread-local mode: allowed. */
    o.mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    OK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_GLOBAL));
    pthread_create(&th, NULL, other_thread, &o);
    pthread_join(th, NULL);
    CHECK(o.alloc == CUDA_SUCCESS, "a thread-local thread ignores other threads' captures");
    OK(cuStreamEndCapture(s2, &g));
    OK(cuGraphDestroy(g));
    /* A relaxed capture may be ended on another thread. */
    OK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_RELAXED));
    o.mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    pthread_create(&th, NULL, other_thread, &o);
    pthread_join(th, NULL);
    CHECK(o.alloc == CUDA_SUCCESS && o.end == CUDA_SUCCESS, "a relaxed capture ends on another thread");
    CUstreamCaptureStatus st;
    OK(cuStreamIsCapturing(s2, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "ended by the other thread");
}

/* User objects: the destructor runs (on another thread) once the graph and
 * every executable graph made from it are gone. */
static volatile int destroyed;
static void CUDA_CB destroy_user(void *p) {
    __atomic_add_fetch((int *)p, 1, __ATOMIC_SEQ_CST);
}

static void user_objects(void) {
    CUuserObject obj;
    EXPECT(cuUserObjectCreate(&obj, (void *)&destroyed, destroy_user, 1, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuUserObjectCreate(&obj, (void *)&destroyed, destroy_user, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CUgraph g;
    CUgraphNode e;
    OK(cuGraphCreate(&g, 0));
    OK(cuGraphAddEmptyNode(&e, g, NULL, 0));
    OK(cuGraphRetainUserObject(g, obj, 1, CU_GRAPH_USER_OBJECT_MOVE)); /* our reference moves to the graph */
    OK(cuUserObjectRetain(obj, 2));
    OK(cuUserObjectRelease(obj, 2));
    CUgraphExec exec;
    OK(cuGraphInstantiate(&exec, g, 0));
    EXPECT(cuGraphReleaseUserObject(g, obj, 2), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphDestroy(g));
    CHECK(__atomic_load_n(&destroyed, __ATOMIC_SEQ_CST) == 0, "the executable graph keeps the user object");
    OK(cuGraphExecDestroy(exec));
    for (long i = 0; i < 2000000000L && __atomic_load_n(&destroyed, __ATOMIC_SEQ_CST) == 0; i++)
        ;
    CHECK(__atomic_load_n(&destroyed, __ATOMIC_SEQ_CST) == 1, "destructor ran once after the last reference");
}

/* An event recorded behind pending work reports NOT_READY until it is done. */
static void event_query(CUstream s) {
    CUevent e;
    OK(cuEventCreate(&e, 0));
    OK(cuEventQuery(e)); /* never recorded: complete */
    unsigned n = N;
    void *args[] = {&da, &db, &dc, &n};
    OK(cuLaunchKernel(vadd, (N + 127) / 128, 1, 1, 128, 1, 1, 0, s, args, NULL));
    OK(cuEventRecord(e, s));
    CUresult r = cuEventQuery(e);
    CHECK(r == CUDA_ERROR_NOT_READY, "event query sees pending work");
    int spins = 0;
    while ((r = cuEventQuery(e)) == CUDA_ERROR_NOT_READY && spins < 10000000)
        spins++;
    CHECK(r == CUDA_SUCCESS, "polling the event completes without a synchronisation");
    OK(cuLaunchKernel(vadd, (N + 127) / 128, 1, 1, 128, 1, 1, 0, s, args, NULL));
    CHECK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY, "stream query sees pending work");
    spins = 0;
    while ((r = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY && spins < 10000000)
        spins++;
    CHECK(r == CUDA_SUCCESS, "polling the stream completes");
    OK(cuEventSynchronize(e));
    OK(cuEventQuery(e));
    OK(cuEventDestroy(e));
}

int main(int argc, char **argv) {
    char *ptx = read_in(data_dir(argc, argv), "vadd_f32.ptx", NULL);
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuCtxCreate(&ctx, NULL, 0, dev));
    OK(cuModuleLoadData(&mod, ptx));
    OK(cuModuleGetFunction(&vadd, mod, "vadd_f32"));
    OK(cuMemAlloc(&da, N * 4));
    OK(cuMemAlloc(&db, N * 4));
    OK(cuMemAlloc(&dc, N * 4));
    OK(cuMemAlloc(&dd, N * 4));
    CUstream s, s2;
    OK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));

    explicit_graph(s);
    captured_graph(s, s2);
    capture_errors(s, s2);
    event_query(s);
    user_objects();
    capture_threads(ctx, s2);
    generic_nodes(s);

    OK(cuStreamDestroy(s));
    OK(cuStreamDestroy(s2));
    OK(cuModuleUnload(mod));
    OK(cuCtxDestroy(ctx));
    free(ptx);
    printf("graphs: %d checks passed\n", checks);
    return 0;
}
