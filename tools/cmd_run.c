/* cubpf run: placeholder until issue 6 lands; says so plainly. */
#include "tools/commands.h"

int cmd_run(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return cmd_not_available("run", "6");
}
