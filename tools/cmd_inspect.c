/* cubpf inspect: placeholder until issue 2 lands; says so plainly. */
#include "tools/commands.h"

int cmd_inspect(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return cmd_not_available("inspect", "2");
}
