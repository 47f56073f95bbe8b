/* cubpf trace: placeholder until issue 7 lands; says so plainly. */
#include "tools/commands.h"

int cmd_trace(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return cmd_not_available("trace", "7");
}
