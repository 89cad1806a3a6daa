"""The agent: a ReAct loop over any LLM that optimises a task in its workspace.

``llm`` has the model clients (OpenAI-compatible servers, Anthropic, local transformers), ``tools``
the tools the model calls, ``loop`` one episode, ``runner`` many at once, ``trajectory`` and
``replay`` the record of an episode and the views of it.
"""
