"""The service layer: the operations the CLI, the agent's tools and the HTTP API share, each written once.

A feature is a function here over the layers below; its faces only parse their input and render
the result. ``traces`` resolves a trace by path, id or name and caches its analysis; ``ingest``
loads one into the graph database; ``whatif`` predicts and optimizes.
Imports every layer below it; the CLI, the agent's tools and the HTTP API call it.
"""
