"""The hardware's rules in Python, no GPU needed: TMA, wgmma, tensor memory, number formats, pipelines, SASS."""
