/* The SSH options rdcp and rdpipe take on their command lines: -P, -o
 * and --connect-timeout, into struct cp_ssh_opts. */
#include "cp/remote.h"

#include "core/log.h"
#include "core/units.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

static int bad(const char *opt, const char *arg, const char *want)
{
	rdx_error("invalid value '%s' for %s: expected %s", arg, opt, want);
	return -1;
}

int cp_ssh_connect_timeout(struct cp_ssh_opts *o, uint64_t *connect_ms, const char *opt,
			   const char *arg)
{
	uint64_t ms;

	if (rdx_parse_seconds(arg, &ms) || ms < 1000)
		return bad(opt, arg, "at least 1 second");
	*connect_ms = ms;
	o->connect_timeout_s = (long)(ms / 1000);
	return 0;
}

int cp_ssh_port(struct cp_ssh_opts *o, const char *opt, const char *arg)
{
	uint64_t v;

	if (rdx_parse_uint(arg, 1, 65535, &v))
		return bad(opt, arg, "a port from 1 to 65535");
	o->port = arg;
	return 0;
}

/* Keywords scripts pass to scp that change nothing a login proves or
 * sends here: warned about, not refused.  Anything not named anywhere is
 * refused, since it might (ForwardAgent and the like included: ignoring
 * one that asks for more would be safe, but a user should know). */
static const char *const ignored[] = {
	"LogLevel", "ServerAliveInterval", "ServerAliveCountMax", "TCPKeepAlive",
	"ConnectionAttempts", "ControlMaster", "ControlPath", "ControlPersist",
	"IdentitiesOnly", "AddressFamily", "SendEnv", "SetEnv", "RequestTTY",
	"ForwardX11", "ClearAllForwardings", "UpdateHostKeys", "HashKnownHosts",
	"VisualHostKey", "CheckHostIP", "EscapeChar",
};

/* Keywords libssh's own config parser applies, passed to it as written
 * (cmdline_config in remote.c).  Host key checking stays ours
 * (StrictHostKeyChecking, UserKnownHostsFile above), so no keyword here
 * can loosen it. */
static const char *const by_libssh[] = {
	"ProxyJump", "ProxyCommand", "HostName", "HostKeyAlgorithms", "KexAlgorithms",
	"MACs", "PubkeyAcceptedAlgorithms", "PubkeyAcceptedKeyTypes", "PasswordAuthentication",
	"KbdInteractiveAuthentication", "PubkeyAuthentication", "GSSAPIAuthentication",
	"GlobalKnownHostsFile", "IdentityAgent", "BindAddress", "RekeyLimit",
};

/* A value for a config line: printable, no line break, no comment. */
static bool one_line(const char *v)
{
	for (; *v; v++)
		if ((unsigned char)*v < ' ' || *v == 0x7f || *v == '#')
			return false;
	return true;
}

static int add_cfg(struct cp_ssh_opts *o, const char *key, const char *v, const char *tool)
{
	if (!*v || !one_line(v)) {
		rdx_error("invalid value for -o %s: one line, without '#'", key);
		return -1;
	}
	if (o->ncfg == sizeof(o->cfg) / sizeof(o->cfg[0])) {
		rdx_error("%s takes at most %zu SSH options for libssh", tool,
			  sizeof(o->cfg) / sizeof(o->cfg[0]));
		return -1;
	}
	o->cfg[o->ncfg++] = (struct cp_ssh_kv){ key, v };
	return 0;
}

/* A value that goes into a config line (ProxyJump): one word, printable. */
static bool one_word(const char *v)
{
	for (; *v; v++)
		if ((unsigned char)*v <= ' ' || *v == 0x7f || *v == '#')
			return false;
	return true;
}

int cp_ssh_option(struct cp_ssh_opts *o, uint64_t *connect_ms, const char *tool,
		  const char *arg)
{
	size_t klen = strcspn(arg, "= \t");
	const char *v = arg + klen;

	v += strspn(v, " \t");
	if (*v == '=')
		v++;
	v += strspn(v, " \t");
	if (!klen || !*v) {
		rdx_error("invalid value '%s' for -o: expected Key=Value", arg);
		return -1;
	}
#define KEY_IS(k) (klen == strlen(k) && !strncasecmp(arg, k, klen))
	if (KEY_IS("StrictHostKeyChecking")) {
		if (cp_strict_parse(v, &o->strict))
			return bad("-o StrictHostKeyChecking", v, "yes, accept-new or no");
		o->strict_set = true;
		return 0;
	}
	if (KEY_IS("UserKnownHostsFile")) {
		o->known_hosts = v;
		return 0;
	}
	if (KEY_IS("User")) {
		o->user = v;
		return 0;
	}
	if (KEY_IS("Port"))
		return cp_ssh_port(o, "-o Port", v);
	if (KEY_IS("IdentityFile")) {
		o->identity = v;
		return 0;
	}
	if (KEY_IS("ConnectTimeout"))
		return cp_ssh_connect_timeout(o, connect_ms, "-o ConnectTimeout", v);
	if (KEY_IS("BatchMode")) {
		if (strcasecmp(v, "yes") && strcasecmp(v, "no"))
			return bad("-o BatchMode", v, "yes or no");
		o->batch = !strcasecmp(v, "yes");
		o->batch_set = true;
		return 0;
	}
	if (KEY_IS("Ciphers"))
		return cp_ssh_cli(o, connect_ms, tool, 'c', v);
	for (size_t i = 0; i < sizeof(by_libssh) / sizeof(by_libssh[0]); i++)
		if (KEY_IS(by_libssh[i]))
			return add_cfg(o, by_libssh[i], v, tool);
	if (KEY_IS("Compression")) {
		if (strcasecmp(v, "yes") && strcasecmp(v, "no"))
			return bad("-o Compression", v, "yes or no");
		o->compression = strcasecmp(v, "yes") ? "no" : "yes";
		return 0;
	}
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		if (KEY_IS(ignored[i])) {
			rdx_warn("-o %s is ignored: it changes nothing %s does", ignored[i], tool);
			return 0;
		}
#undef KEY_IS
	rdx_error("unsupported -o option '%.*s' (%s takes StrictHostKeyChecking, UserKnownHostsFile, User, Port, IdentityFile, ConnectTimeout, BatchMode, Ciphers, Compression, and what libssh applies: ProxyJump, ProxyCommand, HostName, HostKeyAlgorithms, KexAlgorithms, MACs, ...)",
		  (int)klen, arg, tool);
	return -1;
}

int cp_ssh_cli(struct cp_ssh_opts *o, uint64_t *connect_ms, const char *tool, int key,
	       const char *arg)
{
	switch (key) {
	case 'P':
		return cp_ssh_port(o, "--ssh-port", arg);
	case 'i':
		o->identity = arg;
		return 0;
	case 'F':
		o->config = arg;
		return 0;
	case 'o':
		return cp_ssh_option(o, connect_ms, tool, arg);
	case 'B':
		o->batch = true;
		o->batch_set = true;
		return 0;
	case 'c':
		if (!*arg || !one_word(arg))
			return bad("-c", arg, "a cipher list as ssh -c takes it");
		o->ciphers = arg;
		return 0;
	case 'J':
		if (!*arg || !one_word(arg))
			return bad("-J", arg, "[user@]host[:port][,...] as ssh -J takes it");
		return add_cfg(o, "ProxyJump", arg, tool);
	default:
		return 1;
	}
}
