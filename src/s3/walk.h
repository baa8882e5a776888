/* The two sides of a recursive copy or a sync, as sorted lists of
 * relative names: a local directory walked without following symlinks,
 * or the keys under an S3 prefix.  Also what maps one onto the other
 * safely: the --include/--exclude rules, and the check that a key names
 * a path inside the destination directory (no '..', nothing absolute,
 * no symlink on the way). */
#ifndef RDS3_WALK_H
#define RDS3_WALK_H

#include "core/tree/rules.h"
#include "s3/s3.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct s3_item {
	char *rel; /* relative name, '/'-separated */
	uint64_t size;
	int64_t mtime; /* seconds: a file's st_mtime, an object's LastModified */
	char *etag;    /* objects only, quotes included */
};

struct s3_tree {
	struct s3_item *v;
	size_t n, cap;
};

/* Walks the directory root (not following symlinks: a symlink, socket,
 * FIFO or device is skipped with a warning; rds3's own temporaries,
 * .NAME.rdx-XXXXXX and .NAME.rdx-part[.meta], are skipped) and appends
 * every regular file passing the rules to t, sorted by name.  A directory
 * or entry below the root that cannot be read is reported ("cannot read
 * 'PATH': ...") and counted in *unreadable, and the walk goes on.
 * Returns 0, or -errno for the root itself (not printed), or -ENOMEM. */
int s3_walk_local(const char *root, const struct rdx_rule *rules, size_t nrules,
		  struct s3_tree *t, size_t *unreadable);

/* Lists every key under prefix (ListObjectsV2, no delimiter, page by
 * page) and appends those passing the rules to t with rel = the key
 * without prefix, sorted by name.  Keys ending in '/' (folder markers)
 * are kept only when keep_markers.  Returns 0 or an s3_last_error(c)
 * code. */
int s3_walk_remote(struct s3_client *c, const char *bucket, const char *prefix,
		   const struct rdx_rule *rules, size_t nrules,
		   bool keep_markers, struct s3_tree *t);

/* Finds rel in the sorted t; NULL when absent. */
const struct s3_item *s3_tree_find(const struct s3_tree *t, const char *rel);

void s3_tree_release(struct s3_tree *t);

/* Whether rel may become a path under a local directory: not empty, not
 * absolute, no empty, '.' or '..' component, at most 4000 bytes.  When
 * not, *why says why (a static string). */
bool s3_rel_path_ok(const char *rel, const char **why);

/* Makes the directories of rel's parent under root, refusing to go
 * through a symlink or anything but a directory (openat with
 * O_NOFOLLOW, component by component), and checks that rel itself is not
 * a symlink or a directory.  *dir (unless NULL): that parent's descriptor
 * (O_PATH), the caller's to close, for writing rel without looking its
 * path up again (s3_out_open_at).  Returns 0, -ELOOP (a symlink on the
 * way), -ENOTDIR, -EISDIR or another -errno. */
int s3_local_prepare(const char *root, const char *rel, int *dir);

/* Removes the file rel under root (--delete), going down with openat and
 * O_NOFOLLOW as s3_local_prepare() does, so a directory swapped for a
 * symlink since the walk is not followed (-ELOOP or -ENOTDIR).  A file
 * already gone is no error.  Returns 0 or -errno. */
int s3_local_unlink(const char *root, const char *rel);

/* "2024-05-01T10:00:00.000Z" (ListObjectsV2) or "Wed, 01 May 2024
 * 10:00:00 GMT" (Last-Modified) in seconds since the epoch; -1 when it
 * is neither. */
int64_t s3_parse_time(const char *s);

#endif
