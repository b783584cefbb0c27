"""The rules that need no I/O: page arithmetic and links, body and date formatting, the
wire schemas, who may do what."""
