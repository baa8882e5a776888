/* --sync on the sender's side: the receiver's listing, taken in, and the
 * plan of what to send (and, with --delete, to remove). */
#include "core/tree/tree_pack_int.h"

/* ---- --sync: the receiver's listing ----------------------------------- */

void rdx_tree_plan_options(struct rdx_tree_plan *p, bool delete, bool dry_run)
{
	p->delete = delete;
	p->dry_run = dry_run;
}

int rdx_tree_plan_new(struct rdx_tree_plan **out, const uint8_t key[RDX_LIST_KEY_LEN])
{
	struct rdx_tree_plan *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	memcpy(p->key, key, sizeof(p->key));
	p->cap = 1024;
	p->slots = calloc(p->cap, sizeof(*p->slots));
	if (!p->slots) {
		free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

static struct plan_slot *plan_find(const struct rdx_tree_plan *p, const char *name,
				   size_t len)
{
	size_t i = (size_t)XXH3_64bits(name, len) & (p->cap - 1);

	while (p->slots[i].name &&
	       (strlen(p->slots[i].name) != len || memcmp(p->slots[i].name, name, len)))
		i = (i + 1) & (p->cap - 1);
	return &p->slots[i];
}

static int plan_grow(struct rdx_tree_plan *p)
{
	struct rdx_tree_plan bigger = { .cap = p->cap * 2 };
	size_t i;

	bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
	if (!bigger.slots)
		return -ENOMEM;
	for (i = 0; i < p->cap; i++)
		if (p->slots[i].name)
			*plan_find(&bigger, p->slots[i].name, strlen(p->slots[i].name)) = p->slots[i];
	free(p->slots);
	p->slots = bigger.slots;
	p->cap = bigger.cap;
	return 0;
}

int rdx_tree_plan_add(struct rdx_tree_plan *p, const struct rdx_list_entry *e)
{
	struct plan_slot *slot;

	if ((p->used + 1) * 2 > p->cap && plan_grow(p))
		return -ENOMEM;
	slot = plan_find(p, e->name, e->len);
	if (!slot->name) {
		slot->name = strndup(e->name, e->len);
		if (!slot->name)
			return -ENOMEM;
		p->used++;
	}
	slot->size = e->size;
	slot->mtime = e->mtime;
	slot->type = e->type;
	memcpy(slot->hash, e->hash, sizeof(slot->hash));
	return 0;
}

void rdx_tree_plan_free(struct rdx_tree_plan *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->cap; i++)
		free(p->slots[i].name);
	free(p->slots);
	explicit_bzero(p->key, sizeof(p->key));
	free(p);
}

/* Notes that the walk has e; returns true when the receiver has it as a
 * regular file as it is here: same size, and same mtime or (--checksum)
 * same content.  e's source path is absolute (rdx_tree_pack_start). */
bool tp_plan_walked(const struct rdx_tree_plan *p, struct archive_entry *e)
{
	const char *name = archive_entry_pathname(e);
	struct plan_slot *slot = plan_find(p, name, strlen(name));

	uint8_t mine[16];

	if (!slot->name)
		return false;
	slot->seen = true;
	if (archive_entry_filetype(e) != AE_IFREG || slot->size != (uint64_t)archive_entry_size(e))
		return false;
	/* --checksum: the same bytes, whatever the times say. */
	if (slot->type == RDX_LIST_HASHED)
		return tree_hash_file(archive_entry_sourcepath(e), p->key, mine) == 0 &&
		       !memcmp(mine, slot->hash, sizeof(mine));
	return slot->type == RDX_LIST_FILE && slot->mtime == (int64_t)archive_entry_mtime(e);
}

static int by_name_desc(const void *a, const void *b)
{
	return -strcmp(*(char *const *)a, *(char *const *)b);
}

/* A marker entry (RDX_TREE_DELETE_NAME, RDX_TREE_MISSING_NAME) whose
 * data is a name.  Returns 0, -ENOMEM or -EPIPE. */
int tp_pack_marker(struct archive *w, const char *marker, const char *name)
{
	struct archive_entry *e = archive_entry_new();
	size_t len = strlen(name);
	int ret = 0;

	if (!e)
		return -ENOMEM;
	archive_entry_set_pathname(e, marker);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0400);
	archive_entry_set_size(e, (la_int64_t)len);
	if (archive_write_header(w, e) < ARCHIVE_WARN ||
	    archive_write_data(w, name, len) != (la_ssize_t)len)
		ret = -EPIPE;
	archive_entry_free(e);
	return ret;
}

/* --delete: the removal entries for what the receiver listed and the walk
 * did not see, children first (names in descending order put "d/x"
 * before "d").  Returns 0, -ENOMEM or -EPIPE. */
int tp_pack_deletes(struct rdx_tree_plan *p, const struct rdx_rule *rules,
			size_t nrules, struct archive *w)
{
	char **names = malloc((p->used ? p->used : 1) * sizeof(*names));
	size_t i, n = 0;
	int ret = 0;

	if (!names)
		return -ENOMEM;
	/* What the rules exclude was not walked, not gone: it stays. */
	for (i = 0; i < p->cap; i++) {
		const char *name = p->slots[i].name, *rel = name ? strchr(name, '/') : NULL;

		if (name && !p->slots[i].seen &&
		    (!rel || rdx_rules_pass_path(rules, nrules, rel + 1)))
			names[n++] = p->slots[i].name;
	}
	qsort(names, n, sizeof(*names), by_name_desc);
	for (i = 0; i < n && !ret; i++) {
		if (p->dry_run)
			rdx_info(0, "would delete '%s'", names[i]);
		else
			ret = tp_pack_marker(w, RDX_TREE_DELETE_NAME, names[i]);
	}
	free(names);
	return ret;
}
