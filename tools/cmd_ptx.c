/* cubpf ptx: placeholder until issue 5 lands; says so plainly. */
#include "tools/commands.h"

int cmd_ptx(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return cmd_not_available("ptx", "5");
}
