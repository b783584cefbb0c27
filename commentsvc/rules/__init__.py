"""The rules that need no I/O: page arithmetic and links, body and date formatting, the
wire schemas, who may do what, the built-in content types and the range of ids."""
