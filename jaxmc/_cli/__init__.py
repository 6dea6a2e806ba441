"""Parts of the `jaxmc` command line (`jaxmc.cli`), one concern per module:
PRISM's switches (`switches`), the last-resort error handler (`crash`),
`--prop` texts and their locations (`props`), exploration progress
(`progress`) and PRISM's explicit model files (`explicit`)."""
