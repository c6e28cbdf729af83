"""The hardware's rules in Python, no GPU needed: TMA, wgmma and tcgen05 descriptors, MMA operand layouts, tensor memory, number formats, pipelines, SASS."""
