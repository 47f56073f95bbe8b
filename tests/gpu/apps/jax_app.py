# JAX: the GPU must be visible under the shim; a small exact computation.
import jax
import jax.numpy as jnp

devs = jax.devices()
print("devices:", [d.platform for d in devs])
assert devs[0].platform == "gpu", "JAX does not see the GPU"
a = jnp.arange(256 * 256, dtype=jnp.int32).reshape(256, 256) % 13
b = (jnp.arange(256 * 256, dtype=jnp.int32).reshape(256, 256) * 3) % 11
c = jnp.matmul(a, b)
print("jax int matmul sum=%d trace=%d" % (int(c.sum()), int(jnp.trace(c))))
f = jax.jit(lambda x: jnp.sum(jnp.sin(x) ** 2 + jnp.cos(x) ** 2))
print("jax jit sum=%.3f" % float(f(jnp.linspace(0, 10, 4096))))
print("jax_app: done")
