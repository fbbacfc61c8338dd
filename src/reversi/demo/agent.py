"""What happens in `reversi demo`: the agent's calls through the gateway, the halt, the operator's
resolve and rollback through the operator endpoint, and the before/after of the shop, printed."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

from mcp import Client, types
from mcp.shared.exceptions import MCPError

import reversi
from reversi.core.json_values import JSONObject, JSONObjectView, LooseJSON, LooseJSONObject
from reversi.demo.fakes.slack import CHANNEL
from reversi.demo.shop import SHOP, Fakes, Shop, diff
from reversi.errors import DemoFailed

Echo = Callable[[str], None]
Say = Callable[[LooseJSON], str]  # what it says of a tool's structured answer

AGENT, TENANT, ENVIRONMENT, OPERATOR = "billing-agent", "acme", "demo", "dana"
INVOICE = "INV-2041\ncustomer: acme\nPro plan, March: $49.00\n"
PRICES = "sku,plan,price\nPRO,Pro plan,59.00\nSEAT,extra seat,19.00\n"
SECOND_INVOICE = "INV-2042\ncustomer: acme\nextra seat, March: $19.00\n"
CHARGE: JSONObject = {"amount": 4900, "currency": "usd", "customer": "cus_acme_42", "description": "INV-2041 Pro plan"}
LATE_CHARGE = {"amount": 1900, "currency": "usd", "customer": "cus_acme_42", "description": "INV-2042 extra seat"}
EMAIL: JSONObject = {"to": "ap@acme.example", "subject": "Receipt for INV-2041",
                     "body": "Thank you: we charged $49.00."}
HALT_REASON = "checking acme's charges for duplicates"


def _key(key: JSONObjectView) -> str:
    return " ".join(f"{name}={value}" for name, value in key.items())


def _text(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


@dataclass
class Tour:
    """One run of the demo: the agent's side, then the operator's, printing as it goes."""

    run_id: str
    db_url: str
    shop: Shop
    fakes: Fakes
    echo: Echo
    before: list[str] = field(default_factory=list)
    report: LooseJSONObject = field(default_factory=dict)
    steps: int = 0
    timed_out: int = -1
    email: int = -1
    left: str | None = None  # the run left for the reader, once made

    @property
    def yours(self) -> str:
        """The second run's id: the one the demo leaves for the reader to roll back."""
        return f"{self.run_id}_yours"

    @property
    def scope_flags(self) -> list[str]:
        return ["--actor", AGENT, "--tenant", TENANT, "--environment", ENVIRONMENT]

    def _heading(self, title: str) -> None:
        self.echo("")
        self.echo(title)

    def _explain(self, text: str) -> None:
        self.echo(textwrap.fill(text, width=100))

    def _indented(self, text: str) -> None:
        for line in text.splitlines():
            self.echo(f"  {line}")

    def introduce(self, command: str) -> None:
        self.before = self.shop.state(self.fakes)
        self._heading(f"1. The agent ({AGENT}, tenant {TENANT}) works through the gateway, which journals each call")
        self.echo(f"  {command}")

    async def _call(self, agent: Client, tool: str, args: JSONObject, say: Say) -> LooseJSON:
        result = await agent.call_tool(tool, args)
        if result.is_error:
            raise DemoFailed(f"{tool} failed: {_text(result)}")
        self.echo(f"  step {self.steps}  {tool:<20} {say(result.structured_content)}")
        self.steps += 1
        return result.structured_content

    async def work(self, agent: Client) -> None:
        """The agent's calls: files, rows, a charge, a message, an email, a refused call and a timeout."""
        await self._call(agent, "fs.write_file", {"path": "invoices/INV-2041.txt", "content": INVOICE},
                         lambda r: "wrote invoices/INV-2041.txt (a new file)")
        await self._call(agent, "fs.write_file", {"path": "prices.csv", "content": PRICES},
                         lambda r: "rewrote prices.csv (PRO: 49.00 -> 59.00)")
        charge = await self._call(agent, "stripe.create_charge", CHARGE, lambda r: f"charged $49.00: {r['id']}")
        await self._call(agent, "sql.insert",
                         {"table": "payments", "rows": [{"order_id": 2041, "amount": 4900, "charge": charge["id"]}]},
                         lambda r: f"inserted a payments row ({_key(r['keys'][0])})")
        await self._call(agent, "sql.update", {"table": "orders", "key": {"id": 2041}, "values": {"status": "paid"}},
                         lambda r: "set order 2041 to paid")
        await self._call(agent, "slack.post_message",
                         {"channel": CHANNEL, "text": f"Charged acme $49.00 for INV-2041 ({charge['id']})"},
                         lambda r: f"posted to {CHANNEL}: {r['ts']}")
        self.email = self.steps
        await self._call(agent, "http.send_email", EMAIL, lambda r: f"emailed {EMAIL['to']}: {r['id']}")
        await self._halted_call(agent)
        await self._timed_out_call(agent)
        self.echo("")
        self.echo(f"  What the agent changed ({SHOP}/, and the fakes' charges, messages and emails):")
        self._indented("\n".join(diff(self.before, self.shop.state(self.fakes))))

    async def _halted_call(self, agent: Client) -> None:
        with reversi.open(self.db_url) as ledger:
            halt = ledger.add_halt(HALT_REASON, tool="stripe.*", by=OPERATOR)
            self.echo(f"  {OPERATOR}: reversi halt add \"{HALT_REASON}\" --tool 'stripe.*'")
            refused = await agent.call_tool("stripe.create_charge", LATE_CHARGE)
            if not refused.is_error:
                raise DemoFailed("the halt did not refuse the agent's charge")
            self.echo(f"  refused  stripe.create_charge  {_text(refused)}  (journaled refused; Stripe never saw it)")
            ledger.lift_halts(halt.halt_id, by=OPERATOR)
            self.echo(f"  {OPERATOR}: reversi halt lift {halt.halt_id}")

    async def _timed_out_call(self, agent: Client) -> None:
        self.fakes.stripe.hold_next("POST /v1/charges")  # Stripe charges the card; its answer is late
        try:
            result = await agent.call_tool("stripe.create_charge", LATE_CHARGE)
            said = _text(result)
        except MCPError as exc:
            said = str(exc)
        finally:
            self.fakes.stripe.release()
        self.timed_out = self.steps
        self.echo(f"  step {self.steps}  stripe.create_charge no answer in time ({said}): journaled uncertain")
        self.steps += 1

    async def _operator(self, operator: Client, tool: str, args: JSONObject) -> types.CallToolResult:
        result = await operator.call_tool(tool, args)
        if result.is_error:
            raise DemoFailed(f"{tool} failed: {_text(result)}")
        return result

    async def settle_and_roll_back(self, operator: Client, command: str) -> None:
        """Plan, settle the timed-out charge by its probe, plan again and roll back, on the operator endpoint."""
        self._heading("2. The plan: what a rollback would do, newest step first (reversi.plan_rollback)")
        self.echo(f"  {command}")
        self._indented(_text(await self._operator(operator, "reversi.plan_rollback", {"run_id": self.run_id})))
        self._explain(
            f"Step {self.timed_out} timed out, so nobody knows whether it charged the card: Reversi will not guess, "
            f"and leaves it unresolved. Step {self.email} cannot be undone: an email stays sent."
        )
        self._heading(f"3. An operator ({OPERATOR}) asks Stripe what became of the timed-out charge"
                      " (reversi.reconcile)")
        said = (await self._operator(operator, "reversi.reconcile", {"run_id": self.run_id})).structured_content
        settled = {s["step"]: s for s in (said or {}).get("steps", [])}.get(self.timed_out)
        if settled is None or settled.get("outcome") != "succeeded":
            raise DemoFailed(f"the probe did not settle the timed-out charge: {said}")
        self.echo(f"  step {self.timed_out}  {settled['outcome']}  ({settled['why']})")
        self._explain(
            "The connector marked the charge with the step it was made for; the probe (stripe.charge_of_call) "
            "found it by that mark and settled the step with it, sealed for that step alone, so the refund "
            "accepts it. Had it found nothing, the step would stay unresolved: Stripe's search can lag. The "
            "new plan:"
        )
        self._indented(_text(await self._operator(operator, "reversi.plan_rollback", {"run_id": self.run_id})))
        self._heading("4. The rollback (reversi.execute_rollback, confirm: true): each undo runs on the connectors")
        result = await self._operator(operator, "reversi.execute_rollback", {"run_id": self.run_id, "confirm": True})
        self.report = result.structured_content or {}
        self._indented(_text(result))
        self._heading(f"5. Before the agent -> after the rollback ({SHOP}/ and the fakes)")
        self._indented("\n".join(diff(self.before, self.shop.state(self.fakes))))
        self._explain(
            "The files and rows are back as they were, the message is deleted and both charges are refunded (a "
            "charge and its refund stay on the statement: Stripe cannot erase them). The report says rollback "
            "INCOMPLETE, honestly: the email stays sent."
        )

    async def leave_one(self, agent: Client, run_id: str, plan_command: str) -> None:
        """A second, short run that nobody rolls back: the reader's, to undo in the console."""
        self._heading(f"6. One more run, left for you to roll back ({run_id})")
        self.steps = 0
        await self._call(agent, "fs.write_file", {"path": "invoices/INV-2042.txt", "content": SECOND_INVOICE},
                         lambda r: "wrote invoices/INV-2042.txt (a new file)")
        await self._call(agent, "sql.update", {"table": "orders", "key": {"id": 2042}, "values": {"status": "paid"}},
                         lambda r: "set order 2042 to paid")
        self.left = run_id
        self._explain(
            "Nothing undid these two steps. Open the run in the console this demo serves (make demo) and press "
            f"Roll back…, or plan it here: {plan_command}"
        )

    def what_went_wrong(self) -> str | None:
        """None when the rollback left exactly what cannot be undone; else what differs."""
        report = self.report
        standing = [s for s in range(self.steps) if s != self.email]
        if sorted(report.get("compensated", [])) != standing:
            return f"expected steps {standing} compensated, got {report}"
        if [u["step"] for u in report["unrecoverable"]] != [self.email] or report["failed"] or report["unverified"]:
            return f"unexpected rollback report {report}"
        left = diff(self.before, self.shop.state(self.fakes))
        residue = [line for line in left if line.startswith("+ stripe charge") and line.endswith(": refunded")]
        if sorted(left) != sorted([*residue, *(f"+ email {m['id']} to {m['to']}: {m['subject']}"
                                              for m in self.fakes.mail.outbox)]) or len(residue) != 2:
            return "the shop is not back as it was: " + "; ".join(left)
        return None
