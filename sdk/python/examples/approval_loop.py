#!/usr/bin/env python3
"""The step-by-step client loop with a human approval: start a run, read its
steps one by one, and answer the approval request it parks on.

    stepwise serve --agent sdk/examples/approval-agent.yaml
    python3 sdk/python/examples/approval_loop.py "What is 6*7?"        # asks y/N
    python3 sdk/python/examples/approval_loop.py --yes "What is 6*7?"  # approves everything
    python3 sdk/python/examples/approval_loop.py --asyncio --yes       # the same with AsyncClient

--url (default $STEPWISE_SERVER or http://127.0.0.1:7700), --token (default
$STEPWISE_TOKEN), --agent (default approval-demo).
"""

import argparse
import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from stepwise import AsyncClient, Client, Continuation, HumanInputRequest, Result  # noqa: E402


def show(step) -> None:
    if isinstance(step, Continuation):
        s = step.step
        calls = "".join(f" → {c.name}({json.dumps(c.arguments)})" for c in s.tool_calls)
        print(f"#{s.sequence} {s.kind}{': ' + s.content if s.content else ''}{calls}", flush=True)
    elif isinstance(step, Result):
        print(f"result: {step.value}", flush=True)


def decide(step: HumanInputRequest, yes: bool):
    if step.approval is None:
        return "yes" if yes else input(step.prompt + " ")
    if yes:
        return {"approved": True}
    q = f"approve {step.approval.name}({json.dumps(step.approval.arguments)})? [y/N] "
    return {"approved": input(q).strip().lower() in ("y", "yes")}


def main_sync(args) -> None:
    client = Client(args.url, token=args.token)
    inv = client.initiate(args.agent, args.input)
    print(f"run {inv.run_id} (session {inv.session_id})", flush=True)
    for step in client.steps(inv):
        show(step)
        if isinstance(step, HumanInputRequest):
            answer = decide(step, args.yes)
            client.provide_human_input(inv, step.request_id, answer)
            print("approved" if answer == {"approved": True} or isinstance(answer, str) else "rejected", flush=True)


async def main_async(args) -> None:
    client = AsyncClient(args.url, token=args.token)
    inv = await client.initiate(args.agent, args.input)
    print(f"run {inv.run_id} (session {inv.session_id})", flush=True)
    async for step in client.steps(inv):
        show(step)
        if isinstance(step, HumanInputRequest):
            answer = await asyncio.to_thread(decide, step, args.yes)
            await client.provide_human_input(inv, step.request_id, answer)
            print("approved" if answer == {"approved": True} or isinstance(answer, str) else "rejected", flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("input", nargs="*", default=["What is 6*7?"])
    p.add_argument("--url", default=os.environ.get("STEPWISE_SERVER", "http://127.0.0.1:7700"))
    p.add_argument("--token", default=os.environ.get("STEPWISE_TOKEN"))
    p.add_argument("--agent", default="approval-demo")
    p.add_argument("--yes", action="store_true")
    p.add_argument("--asyncio", action="store_true")
    a = p.parse_args()
    a.input = " ".join(a.input) if isinstance(a.input, list) else a.input
    asyncio.run(main_async(a)) if a.asyncio else main_sync(a)
