/* shim/settings_env.c: the shim reads its numeric settings from the environment through
 * settings.c's checks; apart from settings.c because the cubpf command links that file and not
 * the shim's log. */
#include <stdlib.h>

#include "shim/shim.h"

uint64_t shim_setting_env(enum shim_setting_id id, uint64_t dflt)
{
	const char *v = getenv(shim_setting_name(id));
	char err[256];
	uint64_t x;
	if (!v || !*v)
		return dflt;
	if (shim_setting_parse(id, v, &x, err, sizeof(err)) == 0)
		return x;
	shim_log(SHIM_LOG_WARN, "%s; using the default, %llu", err, (unsigned long long)dflt);
	return dflt;
}
