//go:build cgo

package gpu

// cuFile (GPUDirect Storage), loaded with dlopen. Declarations follow the
// public cufile.h ABI: CUfileError_t is {CUfileOpError err; CUresult cu_err},
// CUfileDescr_t is {int type; union {int fd; void *handle}; const void
// *fs_ops}, CUfileHandle_t is an opaque pointer, and cuFileRead returns
// ssize_t: bytes read (0 at end of file), -1 with errno set, or the negative
// value of a CUfileOpError.

/*
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

typedef struct { int err; int cu_err; } mt_cufile_error;
typedef struct {
	int type;
	union { int fd; void *handle; } handle;
	const void *fs_ops;
} mt_cufile_descr;

struct mt_cufile {
	void *lib;
	mt_cufile_error (*driverOpen)(void);
	mt_cufile_error (*handleRegister)(void **, mt_cufile_descr *);
	void (*handleDeregister)(void *);
	ssize_t (*read)(void *, void *, size_t, off_t, off_t);
	mt_cufile_error (*driverGetProperties)(void *); // optional
};
static struct mt_cufile mt_cf;

// dl_cgo.go's loader, shared with cuda_cgo.go.
struct mt_dl_sym { void **slot; const char *name; };
int mt_dl_load(const char *path, void **lib, const struct mt_dl_sym *syms, size_t n, const char *hint,
               char *err, size_t errlen);

// As mt_cuda_load: fills mt_cf only when every symbol is there; 0, -1 or -2.
static int mt_cufile_load(const char *path, char *err, size_t errlen) {
	struct mt_cufile t;
	memset(&t, 0, sizeof t);
	const struct mt_dl_sym syms[] = {
		{(void **)&t.driverOpen, "cuFileDriverOpen"},
		{(void **)&t.handleRegister, "cuFileHandleRegister"},
		{(void **)&t.handleDeregister, "cuFileHandleDeregister"},
		{(void **)&t.read, "cuFileRead"},
	};
	int rc = mt_dl_load(path, &t.lib, syms, sizeof syms / sizeof syms[0], "", err, errlen);
	if (rc != 0) return rc;
	*(void **)&t.driverGetProperties = dlsym(t.lib, "cuFileDriverGetProperties");
	mt_cf = t;
	return 0;
}

// cuFileDriverGetProperties' leading fields, as cufile.h lays out
// CUfileDrvProps_t: nvfs.major_version and nvfs.minor_version (unsigned ints
// at 0 and 4), then two size_t, then nvfs.dstatusflags (unsigned at 24). The
// struct is read into a zeroed buffer larger than any version of it. -1 when
// the library lacks the call, else its CUfileOpError.
static int mt_cufile_props(unsigned *major, unsigned *minor, unsigned *flags) {
	unsigned char buf[1024];
	memset(buf, 0, sizeof buf);
	*major = *minor = *flags = 0;
	if (!mt_cf.driverGetProperties) return -1;
	mt_cufile_error e = mt_cf.driverGetProperties(buf);
	if (e.err != 0) return e.err;
	memcpy(major, buf, 4);
	memcpy(minor, buf + 4, 4);
	memcpy(flags, buf + 24, 4);
	return 0;
}

static uintptr_t mt_cufile_lib(void) { return (uintptr_t)mt_cf.lib; }

static int mt_cufile_driver_open(int *cu_err) {
	mt_cufile_error e = mt_cf.driverOpen();
	*cu_err = e.cu_err;
	return e.err;
}

// CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1.
static int mt_cufile_register(int fd, uintptr_t *fh, int *cu_err) {
	mt_cufile_descr d;
	memset(&d, 0, sizeof d);
	d.type = 1;
	d.handle.fd = fd;
	void *h = NULL;
	mt_cufile_error e = mt_cf.handleRegister(&h, &d);
	*fh = (uintptr_t)h;
	*cu_err = e.cu_err;
	return e.err;
}

static void mt_cufile_deregister(uintptr_t fh) { mt_cf.handleDeregister((void *)fh); }

static long long mt_cufile_read(uintptr_t fh, unsigned long long base, size_t size, long long foff,
                                long long doff, int *err) {
	errno = 0;
	ssize_t r = mt_cf.read((void *)fh, (void *)(uintptr_t)base, size, (off_t)foff, (off_t)doff);
	*err = errno;
	return (long long)r;
}
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// CUfileOpError values this package names (cufile.h).
const (
	cuFileIONotSupported       = 5008
	cuFilePlatformNotSupported = 5007
	cuFileInvalidFileType      = 5018
	cuFileInvalidFileOpenFlag  = 5019
)

var cuFileErrorNames = map[int]string{
	5001: "CU_FILE_DRIVER_NOT_INITIALIZED", 5002: "CU_FILE_DRIVER_INVALID_PROPS",
	5003: "CU_FILE_DRIVER_UNSUPPORTED_LIMIT", 5004: "CU_FILE_DRIVER_VERSION_MISMATCH",
	5005: "CU_FILE_DRIVER_VERSION_READ_ERROR", 5006: "CU_FILE_DRIVER_CLOSING",
	5007: "CU_FILE_PLATFORM_NOT_SUPPORTED", 5008: "CU_FILE_IO_NOT_SUPPORTED",
	5009: "CU_FILE_DEVICE_NOT_SUPPORTED", 5010: "CU_FILE_NVFS_DRIVER_ERROR",
	5011: "CU_FILE_CUDA_DRIVER_ERROR", 5012: "CU_FILE_CUDA_POINTER_INVALID",
	5013: "CU_FILE_CUDA_MEMORY_TYPE_INVALID", 5014: "CU_FILE_CUDA_POINTER_RANGE_ERROR",
	5015: "CU_FILE_CUDA_CONTEXT_MISMATCH", 5016: "CU_FILE_INVALID_MAPPING_SIZE",
	5017: "CU_FILE_INVALID_MAPPING_RANGE", 5018: "CU_FILE_INVALID_FILE_TYPE",
	5019: "CU_FILE_INVALID_FILE_OPEN_FLAG", 5020: "CU_FILE_DIO_NOT_SET",
	5022: "CU_FILE_INVALID_VALUE", 5023: "CU_FILE_MEMORY_ALREADY_REGISTERED",
	5024: "CU_FILE_MEMORY_NOT_REGISTERED", 5025: "CU_FILE_PERMISSION_DENIED",
	5026: "CU_FILE_DRIVER_ALREADY_OPEN", 5027: "CU_FILE_HANDLE_NOT_REGISTERED",
	5028: "CU_FILE_HANDLE_ALREADY_REGISTERED", 5029: "CU_FILE_DEVICE_NOT_FOUND",
	5030: "CU_FILE_INTERNAL_ERROR", 5031: "CU_FILE_GETNEWFD_FAILED",
	5033: "CU_FILE_NVFS_SETUP_ERROR", 5034: "CU_FILE_IO_DISABLED",
	5035: "CU_FILE_BATCH_SUBMIT_FAILED", 5036: "CU_FILE_GPU_MEMORY_PINNING_FAILED",
	5037: "CU_FILE_BATCH_FULL", 5038: "CU_FILE_ASYNC_NOT_SUPPORTED",
	5039: "CU_FILE_INTERNAL_BATCH_SETUP_ERROR", 5040: "CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR",
	5041: "CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR", 5042: "CU_FILE_INTERNAL_BATCH_CANCEL_ERROR",
	5043: "CU_FILE_NOMEM_ERROR", 5044: "CU_FILE_IO_ERROR", 5045: "CU_FILE_INTERNAL_BUF_REGISTER_ERROR",
	5046: "CU_FILE_HASH_OPR_ERROR", 5047: "CU_FILE_INVALID_CONTEXT_ERROR",
	5048: "CU_FILE_NVFS_INTERNAL_DRIVER_ERROR", 5049: "CU_FILE_BATCH_NOCOMPAT_ERROR",
	5050: "CU_FILE_IO_MAX_ERROR",
}

// gdsDriver is the process's one cuFile driver and its registered files.
type gdsDriver struct {
	once    sync.Once
	err     *Error
	library string
	// compat: cuFile can only run in its compatibility mode (no nvidia-fs,
	// no P2PDMA); path says which path reads take and how that was found.
	compat bool
	path   string

	mu    sync.Mutex
	files map[int]*gdsFile // by descriptor
}

type gdsFile struct {
	fd       int
	dev, ino uint64
	h        uintptr // cuFile handle; 0 when registration failed
	err      *Error  // the registration failure, remembered
	refs     int
	dead     bool // forgotten or replaced while in use: deregister at refs 0
}

var (
	gdsState  atomic.Pointer[gdsDriver]
	gdsProbed atomic.Bool
)

func init() { gdsState.Store(&gdsDriver{files: map[int]*gdsFile{}}) }

// GDS reads files straight into device memory with cuFile. The driver is
// opened once per process, by the first OpenGDS; each *GDS is a view that
// counts into its own Stats. Safe for concurrent use.
type GDS struct {
	d  *gdsDriver
	st *Stats
}

// OpenGDS returns a GDS reader counting into st (nil: no counters). The
// first call in the process initialises CUDA, loads libcufile and calls
// cuFileDriverOpen, which can take seconds; later calls return the
// remembered answer at once. Errors are KindUnavailable with Reason
// "cuda_unavailable", "cufile_unavailable" (library missing or not a
// library) or "gds_driver_open": fall back to the staged path for the whole
// process. The driver is never closed (no exit-path calls).
func OpenGDS(st *Stats) (*GDS, error) {
	d := gdsState.Load()
	d.once.Do(d.open)
	if d.err != nil {
		return nil, d.err
	}
	return &GDS{d: d, st: st}, nil
}

func (d *gdsDriver) open() {
	gdsProbed.Store(true)
	if err := Init(); err != nil {
		e := *err.(*Error)
		e.reason = "cuda_unavailable"
		d.err = &e
		return
	}
	lib := configured().CUFileLibrary
	if lib == "" {
		lib = cgetenv(EnvCUFileLibrary)
	}
	if lib == "" {
		lib = DefaultCUFileLibrary
	}
	d.library = lib
	cpath := C.CString(lib)
	defer C.free(unsafe.Pointer(cpath))
	var buf [512]C.char
	if C.mt_cufile_load(cpath, &buf[0], C.size_t(len(buf))) != 0 {
		d.err = &Error{Kind: KindUnavailable, Detail: "cufile not found: " + lib + " not loaded: " + C.GoString(&buf[0]),
			reason: "cufile_unavailable"}
		return
	}
	var cuErr C.int
	if code := int(C.mt_cufile_driver_open(&cuErr)); code != 0 {
		d.err = cufileError(KindUnavailable, "cuFileDriverOpen", code, int(cuErr), "gds_driver_open")
		return
	}
	d.compat, d.path = gdsPath()
}

// nvfsVersionFile is where the nvidia-fs kernel module, which GPUDirect
// reads need, reports its version (libcufile reads the same file). A
// variable so tests can point it elsewhere.
var nvfsVersionFile = "/proc/driver/nvidia-fs/version"

// cuFileNVMeP2P is CU_FILE_NVME_P2P_SUPPORTED, the dstatusflags bit of GDS
// through the kernel's PCI P2PDMA, which needs no nvidia-fs (cufile.h).
const cuFileNVMeP2P = 11

// gdsPath decides, once the driver is open, whether cuFile reads can go
// straight to the device or only through cuFile's compatibility mode,
// which does POSIX reads into host bounce buffers and copies them, the
// staged path's work without its lanes. NVIDIA's "cuFile Compatibility Mode"
// page lists a missing nvidia-fs.ko as the usual cause (a VM). GPUDirect:
// nvidia-fs reports a version, or the driver properties show nvidia-fs or
// NVMe P2PDMA support; otherwise compatibility mode.
func gdsPath() (compat bool, path string) {
	if b, err := os.ReadFile(nvfsVersionFile); err == nil {
		v := strings.Join(strings.Fields(string(b)), " ")
		return false, "GPUDirect (nvidia-fs loaded: " + v + ")"
	}
	var major, minor, flags C.unsigned
	switch rc := int(C.mt_cufile_props(&major, &minor, &flags)); {
	case rc == 0 && major > 0:
		return false, fmt.Sprintf("GPUDirect (driver properties: nvidia-fs %d.%d)", major, minor)
	case rc == 0 && flags&(1<<cuFileNVMeP2P) != 0:
		return false, "GPUDirect (driver properties: NVMe P2PDMA, no nvidia-fs)"
	case rc == 0:
		return true, "compatibility mode (no nvidia-fs, no NVMe P2PDMA in the driver properties: " +
			"cuFile reads through host memory)"
	case rc == -1:
		return true, "compatibility mode (no nvidia-fs; this cuFile has no cuFileDriverGetProperties)"
	default:
		return true, fmt.Sprintf("compatibility mode (no nvidia-fs; cuFileDriverGetProperties error %d)", rc)
	}
}

// GDSReason says whether GDS was probed and its answer, without probing:
// "GDS not probed yet", "GDS available: <library>, <path>" (path as
// GDSPath gives it), or "GDS unavailable: <why>".
func GDSReason() string {
	if !gdsProbed.Load() {
		return "GDS not probed yet"
	}
	d := gdsState.Load()
	d.once.Do(d.open) // waits for a probe in progress
	if d.err != nil {
		return "GDS unavailable: " + d.err.Error()
	}
	return "GDS available: " + d.library + ", " + d.path
}

// GDSPath names the path cuFile reads take, without probing: "gpudirect"
// (nvidia-fs or P2PDMA: straight to the device), "compat" (cuFile's
// compatibility mode: POSIX reads and copies inside cuFile),
// "unavailable", or "not probed".
func GDSPath() string {
	if !gdsProbed.Load() {
		return "not probed"
	}
	d := gdsState.Load()
	d.once.Do(d.open)
	switch {
	case d.err != nil:
		return "unavailable"
	case d.compat:
		return "compat"
	}
	return "gpudirect"
}

// Compat reports whether cuFile runs only in its compatibility mode (see
// GDSPath): reads work, but through host bounce buffers, so the staged
// path's pinned lanes are expected to be faster.
func (g *GDS) Compat() bool { return g.d.compat }

func cufileError(kind Kind, op string, code, cuErr int, reason string) *Error {
	e := &Error{Kind: kind, Op: op, Code: code, CodeName: cuFileErrorNames[code], reason: reason}
	if cuErr != 0 {
		e.Detail = fmt.Sprintf("CUDA error %d (%s)", cuErr, errorName(cuResult(cuErr)))
	}
	return e
}

// file returns fd's registration, registering it on first use; the caller
// must call unref.
func (g *GDS) file(fd int) (*gdsFile, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &Error{Kind: KindInvalidArg, Op: "fstat", Detail: fmt.Sprintf("descriptor %d", fd), Errno: err.(syscall.Errno)}
	}
	dev, ino := uint64(st.Dev), uint64(st.Ino)
	d := g.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if f := d.files[fd]; f != nil {
		if f.dev == dev && f.ino == ino {
			if f.err != nil {
				return nil, f.err
			}
			f.refs++
			return f, nil
		}
		// The descriptor was closed and reused for another file without
		// Forget: drop the stale registration.
		d.dropLocked(f)
	}
	f := &gdsFile{fd: fd, dev: dev, ino: ino}
	d.files[fd] = f
	var h C.uintptr_t
	var cuErr C.int
	code := int(C.mt_cufile_register(C.int(fd), &h, &cuErr))
	if code != 0 {
		switch code {
		case cuFileIONotSupported:
			f.err = cufileError(KindUnsupported, "cuFileHandleRegister", code, int(cuErr), "fs_unsupported")
			f.err.Detail = "file system not supported"
		case cuFileInvalidFileOpenFlag, cuFileInvalidFileType, cuFilePlatformNotSupported:
			f.err = cufileError(KindUnsupported, "cuFileHandleRegister", code, int(cuErr), "gds_unsupported")
		default:
			f.err = cufileError(KindUnsupported, "cuFileHandleRegister", code, int(cuErr), "gds_register")
		}
		return nil, f.err
	}
	f.h = uintptr(h)
	f.refs = 1
	return f, nil
}

func (d *gdsDriver) dropLocked(f *gdsFile) {
	if d.files[f.fd] == f {
		delete(d.files, f.fd)
	}
	f.dead = true
	if f.refs == 0 && f.h != 0 {
		C.mt_cufile_deregister(C.uintptr_t(f.h))
		f.h = 0
	}
}

func (g *GDS) unref(f *gdsFile) {
	g.d.mu.Lock()
	defer g.d.mu.Unlock()
	f.refs--
	if f.dead {
		g.d.dropLocked(f)
	}
}

// Forget deregisters fd's cuFile handle (and forgets a remembered
// registration failure). Call it before closing a descriptor that was passed
// to Read; a read in progress on fd keeps the handle until it ends. Forget
// of an unknown fd does nothing.
func (g *GDS) Forget(fd int) {
	g.d.mu.Lock()
	defer g.d.mu.Unlock()
	if f := g.d.files[fd]; f != nil {
		g.d.dropLocked(f)
	}
}

// Read reads size bytes of the file open on fd at fileOff straight into
// device memory at dst with cuFileRead, looping over partial reads. It
// returns the bytes read: size, or fewer with a nil error when the file
// ended first (cuFileRead returned 0). fd should be open with O_DIRECT
// (without it cuFile may refuse the file or use its compatibility mode); it
// is registered with cuFile on first use and the registration kept until
// Forget (a descriptor reused for another file is noticed by its device and
// inode and registered again).
//
// Errors, with the bytes read before them: KindInvalidPointer (dst is not
// device memory or the range runs past its allocation; no fallback);
// KindUnsupported with Reason "fs_unsupported" (cuFileHandleRegister said
// CU_FILE_IO_NOT_SUPPORTED: "file system not supported"), "gds_unsupported"
// or "gds_register" (remembered per file: later reads fail at once);
// KindIO with Reason "gds_read" when cuFileRead failed: Errno set for -1
// (errors.Is(err, syscall.EIO) works), Code the CUfileOpError otherwise
// ("cuFileRead error N"). KindUnsupported and KindIO allow the staged path
// for this request (Fallback). Runs on one locked OS thread with dst's
// context current.
func (g *GDS) Read(fd int, dst uintptr, size uint64, fileOff int64) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	if fileOff < 0 || size > math.MaxInt64 || fileOff > math.MaxInt64-int64(size) {
		return 0, &Error{Kind: KindInvalidArg, Op: "GDS.Read", Detail: "file range out of bounds"}
	}
	info, err := InspectPointer(dst, size)
	if err != nil {
		return 0, err
	}
	f, err := g.file(fd)
	if err != nil {
		return 0, err
	}
	defer g.unref(f)
	var total int64
	err = withContext(info.ctx, func() error {
		for uint64(total) < size {
			var errno C.int
			r := int64(C.mt_cufile_read(C.uintptr_t(f.h), C.ulonglong(dst), C.size_t(size-uint64(total)),
				C.longlong(fileOff+total), C.longlong(total), &errno))
			switch {
			case r > 0 && uint64(r) <= size-uint64(total):
				total += r
			case r > 0:
				return &Error{Kind: KindIO, Op: "cuFileRead", Detail: fmt.Sprintf("returned %d for %d bytes", r, size-uint64(total)), reason: "gds_read"}
			case r == 0:
				return nil // end of file
			case r == -1:
				e := &Error{Kind: KindIO, Op: "cuFileRead", Errno: syscall.Errno(errno), reason: "gds_read"}
				if errno == 0 {
					e.Detail = "failed without errno"
				}
				return e
			default:
				code := int(-r)
				e := cufileError(KindIO, "cuFileRead", code, 0, "gds_read")
				e.Detail = fmt.Sprintf("cuFileRead error %d", code)
				e.Op = ""
				return e
			}
		}
		return nil
	})
	if err == nil && g.st != nil {
		g.st.gdsRequests.Add(1)
		g.st.gdsBytes.Add(uint64(total))
	}
	return total, err
}

func cufileLibHandle() uintptr { return uintptr(C.mt_cufile_lib()) }
