/* cubpf cache: placeholder until issue 7 lands; says so plainly. */
#include "tools/commands.h"

int cmd_cache(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return cmd_not_available("cache", "7");
}
