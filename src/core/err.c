#include "core/err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const rdx_messages[] = {
	[RDX_EPROTO - RDX_EBASE] = "protocol error",
	[RDX_EVERSION - RDX_EBASE] = "incompatible protocol version",
	[RDX_EAUTH - RDX_EBASE] = "authentication failed",
	[RDX_EREMOTE - RDX_EBASE] = "peer reported an error",
	[RDX_EINTEGRITY - RDX_EBASE] = "integrity check failed",
	[RDX_ETIMEOUT - RDX_EBASE] = "timed out",
	[RDX_ECONNECT - RDX_EBASE] = "connection failed",
	[RDX_EINTR - RDX_EBASE] = "interrupted",
	[RDX_EUSAGE - RDX_EBASE] = "invalid usage",
	[RDX_ENOTSUP - RDX_EBASE] = "not supported",
	[RDX_ELOCAL - RDX_EBASE] = "local I/O error",
};

bool rdx_fail_record(int *slot, char *why, size_t cap, bool replace, int err,
		     const char *fmt, va_list ap)
{
	if (*slot && !replace)
		return false;
	*slot = err;
	vsnprintf(why, cap, fmt, ap);
	return true;
}

const char *rdx_strerror(int err)
{
	if (err < 0)
		err = -err;
	if (err > RDX_EBASE && err < RDX_EMAX)
		return rdx_messages[err - RDX_EBASE];
	return strerror(err);
}

int rdx_exit_code(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return RDX_EXIT_OK;
	case RDX_EUSAGE:
		return RDX_EXIT_USAGE;
	case RDX_EAUTH:
	case RDX_EVERSION:
	case RDX_ECONNECT:
	case RDX_ENOTSUP:
	case RDX_ETIMEOUT:
	case RDX_EPROTO:
	case ECONNREFUSED:
	case ECONNRESET:
	case EPIPE:
	case ETIMEDOUT:
	case EHOSTUNREACH:
	case ENETUNREACH:
		return RDX_EXIT_CONN;
	case RDX_ELOCAL:
	case ENOSPC:
	case EDQUOT:
	case EIO:
	case EACCES:
	case EROFS:
	case ENOENT:
	case EISDIR:
	case EFBIG:
		return RDX_EXIT_IO;
	case RDX_EREMOTE:
		return RDX_EXIT_REMOTE;
	case RDX_EINTEGRITY:
		return RDX_EXIT_INTEGRITY;
	case RDX_EINTR:
	case EINTR:
		return RDX_EXIT_INTR;
	default:
		return RDX_EXIT_FAIL;
	}
}
