"""Megatron-LM's indexed-dataset names and header, shared by its writer and by ``merge`` (which must
not pay for importing every writer, and pyarrow with them, to join .bin/.idx pairs)."""

MAGIC = b"MMIDIDX\x00\x00"
DOCUMENT_SUFFIX = "_input_ids_document"
