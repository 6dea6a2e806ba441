"""jaxmc: probabilistic model checking for PRISM models, array-first on JAX."""
