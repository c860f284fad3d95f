#!/usr/bin/env python3
"""An agent whose steps are typed records — a Decision, a Program, Actions —
served by a Python worker, and its trace rendered with the ``--- Step N ---``
templates (the same text as ``stepwise trace``).

    stepwise serve
    OPENAI_API_KEY=... python3 sdk/python/examples/typed_steps.py "Where is order A-17?"

The worker registers the agent ``order-desk`` and serves:
  * triage  — a Decision step: does the question name an order? (→ normalise, or straight to the model)
  * normalise — a Program step: runs a small deterministic program over the ticket and records
    its call and result;
  * lookup_order — a tool the model calls: each call is an Action step.
The model call runs on the server. --url ($STEPWISE_SERVER), --token ($STEPWISE_TOKEN), --model,
--base-url and --api-key-env (an OpenAI-compatible server).
"""

import argparse
import os
import re
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from stepwise import Agent, Client, Decision, Limits, Progress, StepResult, Worker, Yield  # noqa: E402
from stepwise.render import render_steps  # noqa: E402

ORDER = re.compile(r"\b[A-Z]-\d+\b")


def build(model: str, model_options=None) -> Agent:
    agent = Agent("order-desk", model=model, model_options=model_options, start_step="triage",
                  instructions="You answer questions about orders. Use lookup_order for any order id. Be brief.",
                  limits=Limits(max_steps=20, step_timeout="30s"), reducers={"programs": "append"})

    @agent.step("triage", next=["normalise", "llm"])
    def triage(ctx):
        """Decision: does the question name an order?"""
        found = ORDER.search(ctx.run_input)
        yield Yield("triage.order", {"found": bool(found)})
        choice = "normalise" if found else "llm"
        return StepResult(next=choice, state={"order": found.group(0) if found else None},
                          decision=Decision(choice, purpose="Does the question name an order?",
                                            options=["normalise", "llm"]))

    @agent.step("normalise", next=["llm"])
    def normalise(ctx):
        """Program: normalise the ticket before the model sees it."""
        yield Progress(0.0, "running normalise_ticket")
        ticket = {"order": ctx.state["order"], "question": " ".join(ctx.run_input.split())}
        yield Progress(1.0, "done")
        return StepResult(next="llm", content=f"normalised ticket for {ticket['order']}", output=ticket,
                          state={"programs": ["normalise_ticket"]},
                          annotations={"action": "Call Program: normalise_ticket"})

    @agent.tool(parameters={"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"],
                            "additionalProperties": False},
                output_schema={"type": "object", "required": ["order", "status"]})
    def lookup_order(args, ctx):
        """Action: look an order up by its id (like A-17)."""
        return {"order": args["order"], "status": "shipped" if args["order"].endswith("7") else "being packed"}

    return agent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("question", nargs="*", default=["Where is order A-17?"])
    p.add_argument("--url", default=os.environ.get("STEPWISE_SERVER", "http://127.0.0.1:7700"))
    p.add_argument("--token", default=os.environ.get("STEPWISE_TOKEN"))
    p.add_argument("--model", default="openai:gpt-4o-mini")
    p.add_argument("--base-url")
    p.add_argument("--api-key-env")
    a = p.parse_args()
    opts = {k: v for k, v in {"base_url": a.base_url, "api_key_env": a.api_key_env}.items() if v} or None
    worker = Worker(a.url, agents=[build(a.model, opts)], token=a.token, worker_id=f"typed-steps-{os.getpid()}")
    worker.register()
    serving = threading.Thread(target=worker.run, kwargs={"handle_signals": False}, daemon=True)
    serving.start()
    try:
        client = Client(a.url, token=a.token)
        inv = client.initiate("order-desk", " ".join(a.question))
        for step in client.steps(inv):
            pass
        print(f"session {inv.session_id}\n")
        print(render_steps(client.list_steps(inv.session_id)))
    finally:
        worker.stop()
        serving.join(30)


if __name__ == "__main__":
    main()
