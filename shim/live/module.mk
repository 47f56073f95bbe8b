# shim/live/: live probes, a plug-in of the drop-in library (shim/live/README.md).
#
# It plugs in the way any plug-in does, through shim/shim.h (shim_plugin_register, hooks):
# the forwarding core (shim/*.c) never names it, so the test copy of the shim with the hooks
# plug-in of tests/shim links without these objects.  Included by shim/module.mk, which links
# LIVE_OBJS into libcuda.so.1.
LIVE_SRCS    := $(wildcard shim/live/*.c)
LIVE_OBJS    := $(call objs,$(LIVE_SRCS))
