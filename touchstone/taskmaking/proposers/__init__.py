"""Task proposers: mutation (procedural bugs in real code), problems (HumanEval/MBPP JSONL), llm (self-proposal)."""
