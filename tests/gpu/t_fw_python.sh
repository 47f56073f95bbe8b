#!/usr/bin/env bash
# Issue 15 on the frameworks: a Triton kernel, a torch.compile'd model, a JAX jit function, CuPy
# RawKernel and ElementwiseKernel (tests/gpu/frameworks.sh says what is checked).  A framework
# missing on the machine is a failure, not a skip.
exec bash tests/gpu/frameworks.sh triton cupy jax inductor
