/* store/cache_trust.c: whether a module cache may be used, by who can change it.
 *
 * A cached entry is code: its cubin is loaded into the application's GPU context as it is.
 * Whoever can write the database, or replace it (write to its folder, or to a folder above
 * without the sticky bit), can change a cubin, recompute its checksum and have it run in the
 * next process of everyone who uses that cache.  So the database, its -wal and -shm (sqlite
 * reads pages from both), the folder that holds them and every folder above must be writable
 * by nobody but this process's effective user and root (root owns the system's folders and
 * can do anything anyway), unless the user trusts more: a group (CUBPF_CACHE_GROUP), or, for a
 * cache opened read-only, the database's owner.  ccache and the CUDA JIT cache keep a
 * per-user default for this reason; cubpf's default, ~/.cache/cubpf, passes.
 *
 * The checks read st_uid and st_mode, not access(2): root passes every access check, and the
 * question is who else could write, not whether this process can. */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/internal.h"

#define TRUST_HINT "keep the cache where only you can write (the default ~/.cache/cubpf), trust " \
		   "a group with CUBPF_CACHE_GROUP=NAME, or use another's cache read-only with " \
		   "CUBPF_CACHE_READONLY=1"

struct walk {
	const struct store_trust *t;
	uid_t euid;
	uid_t db_owner;     /* trusted when t->read_only */
	int have_db_owner;
	char *err;
	size_t errlen;
};

static void user_name(uid_t uid, char *out, size_t n)
{
	struct passwd pw, *res = NULL;
	char buf[1024];
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res)
		snprintf(out, n, "%s (uid %u)", res->pw_name, (unsigned)uid);
	else
		snprintf(out, n, "uid %u", (unsigned)uid);
}

static void group_name(gid_t gid, char *out, size_t n)
{
	struct group gr, *res = NULL;
	char buf[1024];
	if (getgrgid_r(gid, &gr, buf, sizeof(buf), &res) == 0 && res)
		snprintf(out, n, "%s (gid %u)", res->gr_name, (unsigned)gid);
	else
		snprintf(out, n, "gid %u", (unsigned)gid);
}

/* The user's private group (user private groups: Debian's and Fedora's scheme, where umask 002
 * makes files group-writable): this process's group, named as its user, with nobody else
 * named in it.  Writable by that group is writable by the user alone. */
static int private_group(const struct walk *w, gid_t gid)
{
	struct passwd pw, *pres = NULL;
	struct group gr, *gres = NULL;
	char pbuf[1024], gbuf[4096];
	if (gid != getegid() || getpwuid_r(w->euid, &pw, pbuf, sizeof(pbuf), &pres) || !pres ||
	    getgrgid_r(gid, &gr, gbuf, sizeof(gbuf), &gres) || !gres ||
	    strcmp(gres->gr_name, pres->pw_name))
		return 0;
	for (char **m = gres->gr_mem; m && *m; m++)
		if (strcmp(*m, pres->pw_name))
			return 0;
	return 1;
}

static int owner_trusted(const struct walk *w, const struct stat *st)
{
	return st->st_uid == w->euid || st->st_uid == 0 ||
	       (w->t->read_only && w->have_db_owner && st->st_uid == w->db_owner) ||
	       (w->t->group_trusted && st->st_gid == w->t->gid);
}

/* One file or folder: its owner and who else may write it.  sticky_ok: a sticky folder
 * writable by all is fine (only above the database's own folder). */
static int check_one(struct walk *w, const char *what, const struct stat *st, int sticky_ok)
{
	char who[160];
	int dir = S_ISDIR(st->st_mode), sticky = dir && (st->st_mode & S_ISVTX) && sticky_ok;
	const char *problem = NULL;

	if (!owner_trusted(w, st)) {
		user_name(st->st_uid, who, sizeof(who));
		problem = "is owned by";
	} else if (!S_ISLNK(st->st_mode) && (st->st_mode & S_IWGRP) && !sticky &&
		   !(w->t->group_trusted && st->st_gid == w->t->gid) && !private_group(w, st->st_gid)) {
		group_name(st->st_gid, who, sizeof(who));
		problem = "is writable by group";
	} else if (!S_ISLNK(st->st_mode) && (st->st_mode & S_IWOTH) && !sticky) {
		snprintf(who, sizeof(who), "every user");
		problem = "is writable by";
	}
	if (!problem)
		return 0;
	snprintf(w->err, w->errlen, "%s %s %s, who could change the modules cached there and so "
		 "the code this process runs on the GPU; not used: " TRUST_HINT, what, problem, who);
	return -1;
}

/* Every folder from / down to dir (absolute), each looked at without following its last
 * component: a symbolic link counts as its owner's (its folder is checked one step up), and
 * what it leads to is checked by the caller's second walk over the resolved path. */
static int check_folders(struct walk *w, const char *dir)
{
	char p[PATH_MAX];
	size_t n = strlen(dir);
	struct stat st;
	if (n >= sizeof(p)) {
		snprintf(w->err, w->errlen, "cache folder %.64s... is too long", dir);
		return -1;
	}
	memcpy(p, dir, n + 1);
	if (lstat("/", &st) || check_one(w, "folder /", &st, n > 1)) {
		if (!w->err[0])
			snprintf(w->err, w->errlen, "cannot look at folder /: %s", strerror(errno));
		return -1;
	}
	for (size_t i = 1; i <= n && n > 1; i++) {
		if (i < n && p[i] != '/')
			continue;
		char keep = p[i];
		p[i] = '\0';
		int rc = lstat(p, &st);
		if (rc) {
			snprintf(w->err, w->errlen, "cannot look at folder %s: %s", p, strerror(errno));
			return -1;
		}
		char what[PATH_MAX + 32];
		snprintf(what, sizeof(what), "%s %s", S_ISLNK(st.st_mode) ? "link" : "folder", p);
		if (check_one(w, what, &st, i < n))
			return -1;
		p[i] = keep;
	}
	return 0;
}

/* The database and its two companions: each there or not; never a link. */
static int check_files(struct walk *w, const char *path)
{
	static const char *const suffix[] = {"", "-wal", "-shm"};
	char p[PATH_MAX + 8];
	struct stat st;
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
		if (lstat(p, &st)) {
			if (errno == ENOENT)
				continue;
			snprintf(w->err, w->errlen, "cannot look at %s: %s", p, strerror(errno));
			return -1;
		}
		if (S_ISLNK(st.st_mode)) {
			snprintf(w->err, w->errlen, "%s is a symbolic link: cubpf does not follow links "
				 "to its cache (whoever can change the link chooses the code this process "
				 "loads); name the file itself", p);
			return -1;
		}
		char what[PATH_MAX + 32];
		snprintf(what, sizeof(what), "%s %s", i ? "file" : "database", p);
		if (check_one(w, what, &st, 0))
			return -1;
	}
	return 0;
}

/* The folder of path, made absolute: relative paths are relative to the working folder, whose
 * own folders count as much as the ones named. */
static int folder_of(const char *path, char *out, size_t n)
{
	char cwd[PATH_MAX] = "";
	const char *slash = strrchr(path, '/');
	int len = slash ? (int)(slash - path) : 0;
	if (path[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		return -1;
	int k = path[0] == '/' ? snprintf(out, n, "%.*s", len, path)
			       : snprintf(out, n, "%s%s%.*s", cwd, len ? "/" : "", len, path);
	if (k < 0 || (size_t)k >= n)
		return -1;
	if (!*out)
		snprintf(out, n, "/");
	return 0;
}

int store_cache_trust(const char *path, const struct store_trust *t, char *resolved,
		      size_t rlen, char *err, size_t errlen)
{
	struct walk w = {.t = t, .euid = geteuid(), .err = err, .errlen = errlen};
	err[0] = '\0';
	char dir[PATH_MAX], real[PATH_MAX];
	struct stat st;
	if (t->read_only && lstat(path, &st) == 0 && !S_ISLNK(st.st_mode)) {
		w.db_owner = st.st_uid;
		w.have_db_owner = 1;
	}
	if (folder_of(path, dir, sizeof(dir))) {
		snprintf(err, errlen, "cannot tell the folder of %s: %s", path, strerror(errno));
		return -1;
	}
	if (check_folders(&w, dir))
		return -1;
	if (!realpath(dir, real)) {
		snprintf(err, errlen, "cannot resolve folder %s: %s", dir, strerror(errno));
		return -1;
	}
	if (strcmp(real, dir) && check_folders(&w, real))
		return -1;
	const char *base = strrchr(path, '/');
	int n = snprintf(resolved, rlen, "%s/%s", strcmp(real, "/") ? real : "", base ? base + 1 : path);
	if (n < 0 || (size_t)n >= rlen) {
		snprintf(err, errlen, "the cache path %.64s... is too long once resolved", real);
		return -1;
	}
	return check_files(&w, path);
}
