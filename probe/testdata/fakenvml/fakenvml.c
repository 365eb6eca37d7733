/*
 * fakenvml.c: a fake libnvidia-ml.so.1 that answers through the NVML C ABI
 * from the same fleet fixture the fake nvidia-smi replays, so NVML callers
 * (go-nvml, gssh-helper) run end to end on machines without a GPU.
 *
 *   gcc -shared -fPIC -O2 -o DIR/libnvidia-ml.so.1 fakenvml.c
 *
 * At nvmlInit (refcount 0 -> 1) it reads the directory named by
 * GSSH_FAKE_SMI_DIR: delay, exit, query-gpu.csv, query-compute-apps.csv,
 * L.txt, stderr and version.txt (see ../fake-nvidia-smi). A process keeps one
 * copy of the library for good (callers bind its symbols), so every nvmlInit
 * after a full nvmlShutdown reads the directory again: set the variable,
 * init, query, shut down, repeat.
 *
 * nvmlInit:
 *   delay             sleep that many seconds first (a hung driver)
 *   exit N            nvidia-smi's exit codes are NVML return codes: nvmlInit
 *                     returns N (9 driver not loaded, 12 library not found,
 *                     18 driver/library mismatch, 255 -> 999 unknown), except
 *                     0, 6 (not found: no devices) and 15 (a GPU lost)
 *   no query-gpu.csv  12 NVML_ERROR_LIBRARY_NOT_FOUND (no nvidia-smi: no driver)
 *   no rows, no lost GPU and no "No devices were found": 999 (garbage)
 * Devices: the count is 1 + the highest index of a query-gpu.csv row or a
 *   stderr "Unable to determine the device handle for GPU<i>: <bus>: ..."
 *   line; an index without a row is lost: nvmlDeviceGetHandleByIndex_v2 and
 *   nvmlDeviceGetHandleByPciBusId_v2 (its bus) return 15 GPU_IS_LOST.
 * A field holding a sentinel makes the function reading it return:
 *   [N/A], N/A, [Not Supported]   3 NVML_ERROR_NOT_SUPPORTED
 *   [Insufficient Permissions]    4 NVML_ERROR_NO_PERMISSION
 *   [GPU is lost]                15 NVML_ERROR_GPU_IS_LOST
 *   [GPU requires reset]         16 NVML_ERROR_RESET_REQUIRED; such a GPU also
 *                                  fails every other data query with 16
 *                                  (identity: UUID, name, PCI, index still work)
 *   [Requested functionality has been deprecated]  26 NVML_ERROR_DEPRECATED
 *   ERR!, [Unknown Error], other [..], empty       999 NVML_ERROR_UNKNOWN
 * Values: memory MiB x 1048576; v2 reserved = total - used - free (nvidia-smi's
 *   memory.used excludes it), v1 used = total - free (includes it, as NVML's
 *   v1 does); utilization.memory 0 (not in the fixture); power 3
 *   NOT_SUPPORTED (16 on a reset GPU); driver, NVML and CUDA versions from
 *   version.txt, else driver_version of the first row, NVML version = driver
 *   version less its last part, CUDA 12020.
 * MIG: mig.mode.current Enabled/Disabled (or, when it is a sentinel, MIG lines
 *   in L.txt) gives nvmlDeviceGetMigMode; when enabled the max MIG device
 *   count is 7 and slot k holds L.txt's "MIG <profile> Device k" (others 6
 *   NOT_FOUND), named "<parent name> MIG <profile>", GPU instance id k,
 *   compute instance id 0 (invented: the fixture has no ids). Memory,
 *   utilization, temperature and processes of a MIG device are 3
 *   NOT_SUPPORTED (the fixture does not break them down), unless the parent's
 *   value is an error of another kind, which the MIG device shares.
 * Processes (compute _v2/_v3; graphics and MPS lists are empty): the rows of
 *   query-compute-apps.csv, each on the first GPU whose UUID it names (rows
 *   naming no GPU are dropped); instance ids 0xFFFFFFFF; used memory [N/A]
 *   -> NVML_VALUE_NOT_AVAILABLE; any other sentinel in a row fails the whole
 *   list with its code. nvmlSystemGetProcessName answers process_name.
 * Stubs at the end return 3 NOT_SUPPORTED. Not thread-safe across concurrent
 * nvmlInit/nvmlShutdown.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/* Layouts as in go-nvml v0.13.4-1 pkg/nvml/nvml.h. */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct { unsigned int version; int sensorType; int temperature; } nvmlTemperature_t;
#define STRUCT_VERSION(t, v) ((unsigned int)(sizeof(t) | ((v) << 24U)))
#define VALUE_NOT_AVAILABLE 0xFFFFFFFFFFFFFFFFULL
#define MIB 1048576ULL

#define MAX_GPUS 64
#define MAX_MIGS 16
#define MAX_PROCS 256
#define MAX_MIG_DEVICES 7 /* A100/H100: seven 1g slices */

/* query-gpu.csv columns, in order. */
enum { F_INDEX, F_UUID, F_BUS, F_NAME, F_MEM_TOTAL, F_MEM_USED, F_MEM_FREE,
       F_UTIL, F_TEMP, F_DRIVER, F_MIG, NF };

typedef struct { char text[256]; nvmlReturn_t err; } field; /* err 0: text is the value */

struct gpu {
    int row;          /* has a query-gpu.csv row; without one it is lost */
    int reset;        /* a field says [GPU requires reset] */
    char lostbus[32]; /* bus id from the stderr line of a lost GPU */
    field f[NF];
    int nmig;         /* 1 + highest MIG device index in L.txt */
    struct { int present; char profile[32], uuid[96]; } mig[MAX_MIGS];
};

struct proc { int gpu; field pid, name, mem; };

static struct {
    int refs, ngpus, nprocs, cuda;
    char driver[80], nvml[80];
    struct gpu gpu[MAX_GPUS];
    struct proc proc[MAX_PROCS];
} S;

/* Handles: H[g][0] is GPU g, H[g][1 + k] its MIG device k. Real addresses,
 * since Go keeps a handle in a pointer. */
struct nvmlDevice_st { int gpu, mig; };
static struct nvmlDevice_st H[MAX_GPUS][1 + MAX_MIGS];

static char buf[1 << 16];

/* ---- fixture parsing ---- */

static long slurp(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return (long)n;
}

/* nextline cuts the line at *p and advances *p; NULL at the end. */
static char *nextline(char **p)
{
    char *line = *p, *nl;
    if (!line || !*line)
        return NULL;
    nl = strchr(line, '\n');
    if (nl) {
        *nl = 0;
        *p = nl + 1;
    } else {
        *p = line + strlen(line);
    }
    if (nl && nl > line && nl[-1] == '\r')
        nl[-1] = 0;
    return line;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = 0;
    return s;
}

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

static nvmlReturn_t sentinel(const char *s)
{
    if (!strcmp(s, "[N/A]") || !strcmp(s, "N/A") || !strcmp(s, "[Not Supported]"))
        return NVML_ERROR_NOT_SUPPORTED;
    if (!strcmp(s, "[Insufficient Permissions]"))
        return NVML_ERROR_NO_PERMISSION;
    if (!strcmp(s, "[GPU requires reset]"))
        return NVML_ERROR_RESET_REQUIRED;
    if (!strcmp(s, "[GPU is lost]"))
        return NVML_ERROR_GPU_IS_LOST;
    if (!strcmp(s, "[Requested functionality has been deprecated]"))
        return NVML_ERROR_DEPRECATED;
    if (!strcmp(s, "ERR!") || !*s || s[0] == '[')
        return NVML_ERROR_UNKNOWN;
    return NVML_SUCCESS;
}

static void setfield(field *f, const char *s)
{
    copy(f->text, sizeof f->text, s);
    f->err = sentinel(s);
}

static int digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

/* num reads a field as a whole number. */
static nvmlReturn_t num(const field *f, unsigned long long *v)
{
    if (f->err)
        return f->err;
    if (!digits(f->text))
        return NVML_ERROR_UNKNOWN;
    *v = strtoull(f->text, NULL, 10);
    return NVML_SUCCESS;
}

/* pcibus parses "00000000:07:00.0" or "0000:07:00.0". */
static int pcibus(const char *s, unsigned int *dom, unsigned int *bus, unsigned int *dev)
{
    unsigned int fn;
    return sscanf(s, "%x:%x:%x.%x", dom, bus, dev, &fn) == 4;
}

static int parse_gpus(char *p)
{
    int rows = 0;
    for (char *line; (line = nextline(&p));) {
        char *f[NF + 1];
        int n = 0;
        for (char *s = line; n <= NF;) {
            char *comma = strchr(s, ',');
            if (comma)
                *comma = 0;
            f[n++] = trim(s);
            if (!comma)
                break;
            s = comma + 1;
        }
        if (n != NF || !digits(f[F_INDEX]))
            continue; /* a warning or some other non-row line */
        int i = atoi(f[F_INDEX]);
        if (i >= MAX_GPUS)
            continue;
        struct gpu *g = &S.gpu[i];
        g->row = 1;
        for (int k = 0; k < NF; k++) {
            setfield(&g->f[k], f[k]);
            if (g->f[k].err == NVML_ERROR_RESET_REQUIRED)
                g->reset = 1;
        }
        if (i + 1 > S.ngpus)
            S.ngpus = i + 1;
        rows++;
    }
    return rows;
}

/* parse_lost reads "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error". */
static int parse_lost(char *p)
{
    static const char key[] = "device handle for GPU";
    int lost = 0;
    while ((p = strstr(p, key))) {
        p += sizeof key - 1;
        if (!isdigit((unsigned char)*p))
            continue;
        char *end;
        unsigned long i = strtoul(p, &end, 10);
        p = end;
        if (i >= MAX_GPUS || *end != ':')
            continue;
        char *bus = end + 1, *stop = strstr(bus, ": "), *nl = strchr(bus, '\n');
        if (!stop || (nl && nl < stop))
            stop = nl ? nl : bus + strlen(bus);
        char tmp[32];
        snprintf(tmp, sizeof tmp, "%.*s", (int)(stop - bus), bus);
        copy(S.gpu[i].lostbus, sizeof S.gpu[i].lostbus, trim(tmp));
        if ((int)i + 1 > S.ngpus)
            S.ngpus = (int)i + 1;
        lost++;
    }
    return lost;
}

static void parse_list(char *p)
{
    struct gpu *g = NULL;
    for (char *line; (line = nextline(&p));) {
        unsigned int k;
        char profile[32], uuid[96];
        if (sscanf(line, "GPU %u:", &k) == 1)
            g = k < MAX_GPUS ? &S.gpu[k] : NULL;
        else if (g && sscanf(line, " MIG %31s Device %u: (UUID: %95[^)])", profile, &k, uuid) == 3 &&
                 k < MAX_MIGS) {
            g->mig[k].present = 1;
            copy(g->mig[k].profile, sizeof g->mig[k].profile, profile);
            copy(g->mig[k].uuid, sizeof g->mig[k].uuid, uuid);
            if ((int)k + 1 > g->nmig)
                g->nmig = (int)k + 1;
        }
    }
}

/* parse_apps reads "gpu_uuid, pid, process_name, used_memory"; a name may hold commas. */
static void parse_apps(char *p)
{
    for (char *line; (line = nextline(&p)) && S.nprocs < MAX_PROCS;) {
        char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
        char *c3 = strrchr(line, ',');
        if (!c2 || c3 == c2)
            continue;
        *c1 = *c2 = *c3 = 0;
        char *uuid = trim(line);
        if (strncmp(uuid, "GPU-", 4) && strncmp(uuid, "MIG-", 4))
            continue;
        for (int i = 0; i < S.ngpus; i++) {
            field *u = &S.gpu[i].f[F_UUID];
            if (S.gpu[i].row && !u->err && !strcmp(u->text, uuid)) {
                struct proc *pr = &S.proc[S.nprocs++];
                pr->gpu = i;
                setfield(&pr->pid, trim(c1 + 1));
                setfield(&pr->name, trim(c2 + 1));
                setfield(&pr->mem, trim(c3 + 1));
                break;
            }
        }
    }
}

static const char *after(char *line, const char *key)
{
    char *colon;
    if (strncmp(line, key, strlen(key)) || !(colon = strchr(line, ':')))
        return NULL;
    return trim(colon + 1);
}

static void parse_versions(char *p)
{
    for (char *line; (line = nextline(&p));) {
        const char *v;
        unsigned int major, minor;
        if ((v = after(line, "DRIVER version")))
            copy(S.driver, sizeof S.driver, v);
        else if ((v = after(line, "NVML version")))
            copy(S.nvml, sizeof S.nvml, v);
        else if ((v = after(line, "CUDA Version")) && sscanf(v, "%u.%u", &major, &minor) == 2)
            S.cuda = (int)(major * 1000 + minor * 10);
    }
}

static nvmlReturn_t load(const char *dir)
{
    memset(&S, 0, sizeof S);
    for (int g = 0; g < MAX_GPUS; g++)
        for (int m = 0; m <= MAX_MIGS; m++)
            H[g][m] = (struct nvmlDevice_st){g, m - 1};

    if (slurp(dir, "delay") >= 0) {
        double d = strtod(buf, NULL);
        if (d > 0 && d < 86400) {
            struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
        }
    }
    if (slurp(dir, "exit") >= 0) {
        int code = atoi(buf);
        if (code == 255 || code < 0 || code > 30)
            return NVML_ERROR_UNKNOWN;
        if (code != 0 && code != 6 && code != 15)
            return (nvmlReturn_t)code;
    }
    if (slurp(dir, "query-gpu.csv") < 0)
        return NVML_ERROR_LIBRARY_NOT_FOUND;
    int nodevices = strstr(buf, "No devices were found") != NULL;
    int rows = parse_gpus(buf);
    int lost = slurp(dir, "stderr") >= 0 ? parse_lost(buf) : 0;
    if (!rows && !lost && !nodevices)
        return NVML_ERROR_UNKNOWN;
    if (slurp(dir, "L.txt") >= 0)
        parse_list(buf);
    if (slurp(dir, "query-compute-apps.csv") >= 0)
        parse_apps(buf);
    if (slurp(dir, "version.txt") >= 0)
        parse_versions(buf);

    for (int i = 0; i < S.ngpus && !S.driver[0]; i++)
        if (S.gpu[i].row && !S.gpu[i].f[F_DRIVER].err)
            copy(S.driver, sizeof S.driver, S.gpu[i].f[F_DRIVER].text);
    if (!S.nvml[0] && S.driver[0]) {
        copy(S.nvml, sizeof S.nvml, S.driver);
        char *dot = strrchr(S.nvml, '.');
        if (dot && dot != strchr(S.nvml, '.'))
            *dot = 0; /* 535.161.08 -> 535.161 */
    }
    if (!S.cuda)
        S.cuda = 12020;
    return NVML_SUCCESS;
}

/* ---- helpers for the API ---- */

static nvmlReturn_t put(char *dst, unsigned int len, const char *src)
{
    if (!dst)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

/* dev resolves a handle to its GPU and MIG slot (-1: the GPU itself). */
static nvmlReturn_t dev(nvmlDevice_t d, struct gpu **g, int *mig)
{
    if (!S.refs)
        return NVML_ERROR_UNINITIALIZED;
    uintptr_t off = (uintptr_t)d - (uintptr_t)&H[0][0];
    if (!d || off % sizeof H[0][0] || off >= sizeof H)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (d->gpu >= S.ngpus || !S.gpu[d->gpu].row)
        return NVML_ERROR_INVALID_ARGUMENT;
    *g = &S.gpu[d->gpu];
    *mig = d->mig;
    if (*mig >= 0 && !(*g)->mig[*mig].present)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

/* data resolves a handle for a data query: a GPU needing a reset answers none. */
static nvmlReturn_t data(nvmlDevice_t d, struct gpu **g, int *mig)
{
    nvmlReturn_t r = dev(d, g, mig);
    if (!r && (*g)->reset)
        r = NVML_ERROR_RESET_REQUIRED;
    return r;
}

/* migerr is what a MIG device answers for a value the fixture gives only
 * for its parent: the parent's error unless that is "not supported". */
static nvmlReturn_t migerr(const struct gpu *g, int from, int to)
{
    for (int k = from; k <= to; k++)
        if (g->f[k].err && g->f[k].err != NVML_ERROR_NOT_SUPPORTED)
            return g->f[k].err;
    return NVML_ERROR_NOT_SUPPORTED;
}

/* migmode: 1 enabled, 0 disabled, or minus an NVML error. */
static int migmode(const struct gpu *g)
{
    const field *f = &g->f[F_MIG];
    if (!f->err)
        return !strcmp(f->text, "Enabled") ? 1 : !strcmp(f->text, "Disabled") ? 0 : -NVML_ERROR_UNKNOWN;
    return g->nmig ? 1 : -(int)f->err;
}

/* ---- init, shutdown, errors ---- */

nvmlReturn_t nvmlInit_v2(void)
{
    if (S.refs) {
        S.refs++;
        return NVML_SUCCESS;
    }
    const char *dir = getenv("GSSH_FAKE_SMI_DIR");
    if (!dir || !*dir) {
        fprintf(stderr, "fakenvml: GSSH_FAKE_SMI_DIR is not set\n");
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    nvmlReturn_t r = load(dir);
    if (r == NVML_SUCCESS)
        S.refs = 1;
    return r;
}

nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void)
{
    if (!S.refs)
        return NVML_ERROR_UNINITIALIZED;
    S.refs--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
    switch ((int)r) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 5: return "Already Initialized";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 8: return "Insufficient External Power";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 11: return "Interrupt request issue";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 14: return "Corrupted infoROM";
    case 15: return "GPU is lost";
    case 16: return "GPU requires restart";
    case 17: return "The operating system has blocked the request.";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    case 19: return "In use by another client";
    case 20: return "Insufficient Memory";
    case 21: return "No data";
    case 22: return "The requested vgpu operation is not available on target device, because ECC is enabled";
    case 23: return "Ran out of critical resources, other than memory";
    case 24: return "The requested frequency is not supported";
    case 25: return "Argument version mismatch";
    case 26: return "Deprecated";
    case 27: return "Not Ready";
    case 28: return "No GPUs were found";
    case 29: return "Resource in incorrect state";
    case 30: return "Reset type not supported";
    default: return "Unknown Error";
    }
}

/* ---- system ---- */

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!S.refs)
        return NVML_ERROR_UNINITIALIZED;
    return S.driver[0] ? put(version, length, S.driver) : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    if (!S.refs)
        return NVML_ERROR_UNINITIALIZED;
    return S.nvml[0] ? put(version, length, S.nvml) : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    if (!S.refs)
        return NVML_ERROR_UNINITIALIZED;
    if (!v)
        return NVML_ERROR_INVALID_ARGUMENT;
    *v = S.cuda;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
    if (!S.refs)
        return NVML_ERROR_UNINITIALIZED;
    if (!name || !length)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < S.nprocs; i++) {
        unsigned long long p;
        if (num(&S.proc[i].pid, &p) || p != pid)
            continue;
        if (S.proc[i].name.err)
            return S.proc[i].name.err;
        snprintf(name, length, "%s", S.proc[i].name.text); /* cropped, as NVML does */
        return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_FOUND;
}

/* ---- finding devices ---- */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!S.refs)
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned int)S.ngpus;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!S.refs)
        return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= (unsigned int)S.ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!S.gpu[index].row)
        return NVML_ERROR_GPU_IS_LOST;
    *device = &H[index][0];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    if (!S.refs)
        return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < S.ngpus; i++) {
        const struct gpu *g = &S.gpu[i];
        if (g->row && !g->f[F_UUID].err && !strcmp(g->f[F_UUID].text, uuid)) {
            *device = &H[i][0];
            return NVML_SUCCESS;
        }
    }
    for (int i = 0; i < S.ngpus; i++)
        for (int k = 0; k < S.gpu[i].nmig; k++)
            if (S.gpu[i].row && S.gpu[i].mig[k].present && !strcmp(S.gpu[i].mig[k].uuid, uuid)) {
                *device = &H[i][1 + k];
                return NVML_SUCCESS;
            }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *busId, nvmlDevice_t *device)
{
    unsigned int dom, bus, dv;
    if (!S.refs)
        return NVML_ERROR_UNINITIALIZED;
    if (!busId || !device || !pcibus(busId, &dom, &bus, &dv))
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < S.ngpus; i++) {
        const struct gpu *g = &S.gpu[i];
        unsigned int d2, b2, v2;
        const char *s = g->row ? (g->f[F_BUS].err ? "" : g->f[F_BUS].text) : g->lostbus;
        if (!pcibus(s, &d2, &b2, &v2) || d2 != dom || b2 != bus || v2 != dv)
            continue;
        if (!g->row)
            return NVML_ERROR_GPU_IS_LOST;
        *device = &H[i][0];
        return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *busId, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByPciBusId_v2(busId, device);
}

/* ---- identity ---- */

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = dev(device, &g, &mig);
    if (r)
        return r;
    if (g->f[F_NAME].err)
        return g->f[F_NAME].err;
    if (mig < 0)
        return put(name, length, g->f[F_NAME].text);
    char full[400];
    snprintf(full, sizeof full, "%s MIG %s", g->f[F_NAME].text, g->mig[mig].profile);
    return put(name, length, full);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = dev(device, &g, &mig);
    if (r)
        return r;
    if (mig >= 0)
        return put(uuid, length, g->mig[mig].uuid);
    return g->f[F_UUID].err ? g->f[F_UUID].err : put(uuid, length, g->f[F_UUID].text);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = dev(device, &g, &mig);
    if (r)
        return r;
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mig >= 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *index = (unsigned int)(g - S.gpu);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
    return nvmlDeviceGetIndex(device, minor); /* /dev/nvidia<index> */
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = dev(device, &g, &mig);
    if (r)
        return r;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g->f[F_BUS].err)
        return g->f[F_BUS].err;
    memset(pci, 0, sizeof *pci);
    if (!pcibus(g->f[F_BUS].text, &pci->domain, &pci->bus, &pci->device))
        return NVML_ERROR_UNKNOWN;
    snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", pci->domain, pci->bus, pci->device);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", pci->domain & 0xFFFF,
             pci->bus, pci->device);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

/* ---- values ---- */

static nvmlReturn_t memory(nvmlDevice_t device, unsigned long long v[3])
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = data(device, &g, &mig);
    if (r)
        return r;
    if (mig >= 0)
        return migerr(g, F_MEM_TOTAL, F_MEM_FREE);
    for (int k = 0; k < 3; k++) {
        if ((r = num(&g->f[F_MEM_TOTAL + k], &v[k])))
            return r;
        v[k] *= MIB;
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *m)
{
    unsigned long long v[3]; /* total, used, free */
    nvmlReturn_t r = memory(device, v);
    if (r)
        return r;
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    m->total = v[0];
    m->free = v[2];
    m->used = v[0] > v[2] ? v[0] - v[2] : 0; /* v1 counts reserved memory as used */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *m)
{
    unsigned long long v[3];
    if (!m)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != STRUCT_VERSION(nvmlMemory_v2_t, 2))
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlReturn_t r = memory(device, v);
    if (r)
        return r;
    m->total = v[0];
    m->used = v[1];
    m->free = v[2];
    m->reserved = v[0] > v[1] + v[2] ? v[0] - v[1] - v[2] : 0;
    return NVML_SUCCESS;
}

/* value reads one whole-number field of a GPU (not of a MIG device). */
static nvmlReturn_t value(nvmlDevice_t device, int k, unsigned long long *v)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = data(device, &g, &mig);
    if (r)
        return r;
    if (mig >= 0)
        return migerr(g, k, k);
    return num(&g->f[k], v);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u)
{
    unsigned long long v;
    nvmlReturn_t r = value(device, F_UTIL, &v);
    if (r)
        return r;
    if (!u)
        return NVML_ERROR_INVALID_ARGUMENT;
    u->gpu = (unsigned int)v;
    u->memory = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp)
{
    unsigned long long v;
    nvmlReturn_t r = value(device, F_TEMP, &v);
    if (r)
        return r;
    if (sensor != 0 || !temp) /* NVML_TEMPERATURE_GPU */
        return NVML_ERROR_INVALID_ARGUMENT;
    *temp = (unsigned int)v;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *t)
{
    unsigned int v;
    if (!t)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (t->version != STRUCT_VERSION(nvmlTemperature_t, 1))
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlReturn_t r = nvmlDeviceGetTemperature(device, t->sensorType, &v);
    if (!r)
        t->temperature = (int)v;
    return r;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *milliwatts)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = data(device, &g, &mig);
    (void)milliwatts;
    return r ? r : NVML_ERROR_NOT_SUPPORTED; /* nvidia-smi's fixture has no power column */
}

/* ---- MIG ---- */

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = data(device, &g, &mig);
    if (r)
        return r;
    if (!current || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mig >= 0)
        return NVML_ERROR_NOT_SUPPORTED;
    int mode = migmode(g);
    if (mode < 0)
        return (nvmlReturn_t)-mode;
    *current = *pending = (unsigned int)mode;
    return NVML_SUCCESS;
}

static unsigned int maxmig(const struct gpu *g)
{
    if (migmode(g) != 1)
        return 0;
    return g->nmig > MAX_MIG_DEVICES ? (unsigned int)g->nmig : MAX_MIG_DEVICES;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = data(device, &g, &mig);
    if (r)
        return r;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = mig < 0 ? maxmig(g) : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = data(device, &g, &mig);
    if (r)
        return r;
    if (!migDevice || mig >= 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (migmode(g) != 1)
        return NVML_ERROR_NOT_SUPPORTED;
    if (index >= maxmig(g))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= MAX_MIGS || !g->mig[index].present)
        return NVML_ERROR_NOT_FOUND;
    *migDevice = &H[g - S.gpu][1 + index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMig)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = dev(device, &g, &mig);
    if (r)
        return r;
    if (!isMig)
        return NVML_ERROR_INVALID_ARGUMENT;
    *isMig = mig >= 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = dev(migDevice, &g, &mig);
    if (r)
        return r;
    if (!device || mig < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &H[g - S.gpu][0];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = dev(device, &g, &mig);
    if (r)
        return r;
    if (!id)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mig < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *id = (unsigned int)mig;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    nvmlReturn_t r = nvmlDeviceGetGpuInstanceId(device, id);
    if (!r)
        *id = 0;
    return r;
}

/* ---- processes ---- */

static nvmlReturn_t procs(nvmlDevice_t device, unsigned int *count, nvmlProcessInfo_t *infos, int compute)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = data(device, &g, &mig);
    if (r)
        return r;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    int gi = (int)(g - S.gpu);
    unsigned int n = 0;
    for (int i = 0; i < S.nprocs; i++) {
        const struct proc *p = &S.proc[i];
        if (p->gpu != gi)
            continue;
        if (p->pid.err)
            return p->pid.err;
        if (p->mem.err && p->mem.err != NVML_ERROR_NOT_SUPPORTED)
            return p->mem.err;
        n++;
    }
    if (mig >= 0)
        return NVML_ERROR_NOT_SUPPORTED; /* the fixture lists processes by parent GPU only */
    if (!compute)
        n = 0;
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n && !infos)
        return NVML_ERROR_INVALID_ARGUMENT;
    n = 0;
    for (int i = 0; compute && i < S.nprocs; i++) {
        const struct proc *p = &S.proc[i];
        unsigned long long pid, mem;
        if (p->gpu != gi)
            continue;
        if (num(&p->pid, &pid) || pid > 0xFFFFFFFFULL)
            return NVML_ERROR_UNKNOWN;
        if (p->mem.err)
            mem = VALUE_NOT_AVAILABLE;
        else if (num(&p->mem, &mem))
            return NVML_ERROR_UNKNOWN;
        else
            mem *= MIB;
        infos[n++] = (nvmlProcessInfo_t){(unsigned int)pid, mem, 0xFFFFFFFFu, 0xFFFFFFFFu};
    }
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p)
{
    return procs(d, n, p, 1);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p)
{
    return procs(d, n, p, 1);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p)
{
    return procs(d, n, p, 0);
}

nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p)
{
    return procs(d, n, p, 0);
}

/* ---- stubs: queries the fixture has no column for ---- */

static nvmlReturn_t stub(nvmlDevice_t device)
{
    struct gpu *g;
    int mig;
    nvmlReturn_t r = data(device, &g, &mig);
    return r ? r : NVML_ERROR_NOT_SUPPORTED;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define STUB(fn, ...) \
    nvmlReturn_t fn(nvmlDevice_t device, __VA_ARGS__) { return stub(device); }
STUB(nvmlDeviceGetSerial, char *serial, unsigned int length)
STUB(nvmlDeviceGetBrand, int *type)
STUB(nvmlDeviceGetArchitecture, unsigned int *arch)
STUB(nvmlDeviceGetCudaComputeCapability, int *major, int *minor)
STUB(nvmlDeviceGetPersistenceMode, int *mode)
STUB(nvmlDeviceGetComputeMode, int *mode)
STUB(nvmlDeviceGetPerformanceState, int *pState)
STUB(nvmlDeviceGetFanSpeed, unsigned int *speed)
STUB(nvmlDeviceGetClockInfo, int type, unsigned int *clock)
STUB(nvmlDeviceGetMaxClockInfo, int type, unsigned int *clock)
STUB(nvmlDeviceGetPowerManagementLimit, unsigned int *limit)
STUB(nvmlDeviceGetEnforcedPowerLimit, unsigned int *limit)
STUB(nvmlDeviceGetTotalEnergyConsumption, unsigned long long *energy)
STUB(nvmlDeviceGetTotalEccErrors, int errorType, int counterType, unsigned long long *eccCounts)
STUB(nvmlDeviceGetCurrentClocksEventReasons, unsigned long long *reasons)
STUB(nvmlDeviceGetBAR1MemoryInfo, void *bar1Memory)
#pragma GCC diagnostic pop
