"""The PRISM language: abstract syntax (`ast`), parsing and printing."""

from . import ast as ast
from .parser import (
    parse_expression as parse_expression,
    parse_model as parse_model,
    parse_model_file as parse_model_file,
    parse_properties as parse_properties,
    parse_properties_file as parse_properties_file,
)
from .printer import (
    format_expr as format_expr,
    format_program as format_program,
    format_properties as format_properties,
)
from .source import read_source as read_source
