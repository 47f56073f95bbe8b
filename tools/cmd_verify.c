/* cubpf verify: placeholder until issue 4 lands; says so plainly. */
#include "tools/commands.h"

int cmd_verify(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return cmd_not_available("verify", "4");
}
