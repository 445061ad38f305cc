"""Generated Formula tasks: financial formulas with random but sensible values.

Each task names a formula, states it, explains its variables and asks one question with
concrete values. The target follows the benchmark's rounding rule, read off its data:
the exact result rounded to 2 decimals by Python's `round(x, 2)` and written as
`str()` of that float ("2.0", "8.33", "-15000000.0"). Rates stated in percent enter the
formula as fractions; formulas with "x 100" give percentages. Everything here (names,
wording, value ranges) is written for this project; nothing is copied from the benchmark.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable

Values = dict[str, float]

WHO = ("a regional bakery", "a logistics firm", "a software startup", "a family-owned hardware store",
       "a mid-sized hospital group", "a boutique hotel", "an electronics retailer", "a craft brewery",
       "a solar panel installer", "a furniture maker", "a dental clinic chain", "a shipping company",
       "a textile mill", "a coffee roaster", "an online bookstore", "a car parts distributor")


def benchmark_round(value: float) -> str:
    """Return the target string the benchmark would store for `value`: `str(round(value, 2))`."""
    rounded = round(float(value), 2)
    return str(0.0 if rounded == 0 else rounded)


def money(x: float) -> str:
    """Render an amount of dollars: "$1,250,000" or "$12.50"."""
    sign = "-" if x < 0 else ""
    x = abs(x)
    return f"{sign}${x:,.0f}" if float(x).is_integer() else f"{sign}${x:,.2f}"


def millions(x: float) -> str:
    """Render a number of millions of dollars: "$45 million"."""
    return f"${x:g} million"


def pct(x: float) -> str:
    """Render a percentage given in percent points: "6.5%"."""
    return f"{x:g}%"


def count(x: float) -> str:
    """Render a whole count with thousands separators: "15,000"."""
    return f"{x:,.0f}"


def times(x: float) -> str:
    """Render a compounding frequency: "once", "twice", "12 times"."""
    return {1: "once", 2: "twice"}.get(int(x), f"{x:.0f} times")


def plain(x: float) -> str:
    """Render a plain decimal number: "1.25"."""
    return f"{x:g}"


@dataclass(frozen=True)
class Formula:
    """One formula: how it reads, how its values are drawn and shown, and what it computes."""

    name: str
    expression: str
    variables: str
    sample: Callable[[random.Random], Values]
    show: dict[str, Callable[[float], str]]
    compute: Callable[[Values], float]
    questions: tuple[str, ...]


def _step(rng: random.Random, low: float, high: float, step: float) -> float:
    """A random multiple of `step` in [low, high]."""
    n = rng.randint(round(low / step), round(high / step))
    return round(n * step, 6)


def _ratio(rng: random.Random, base: str, value: float, other: str, low: float, high: float) -> Values:
    """Values `base` and `other`, with `other` between `low` and `high` times `base` (two significant figures)."""
    scaled = value * rng.uniform(low, high)
    step = 10 ** (math.floor(math.log10(scaled)) - 1)
    return {base: value, other: round(round(scaled / step) * step, 6)}


def _cash_flows(rng: random.Random) -> Values:
    return {"c0": _step(rng, 10_000, 60_000, 1_000), "cf1": _step(rng, 3_000, 25_000, 500),
            "cf2": _step(rng, 3_000, 25_000, 500), "cf3": _step(rng, 3_000, 25_000, 500),
            "rate": _step(rng, 3, 12, 0.5)}


FORMULAS: tuple[Formula, ...] = (
    Formula("Current Ratio", "Current Ratio = Current Assets / Current Liabilities",
            "Current Assets: assets convertible to cash within a year; Current Liabilities: "
            "obligations due within a year",
            lambda r: {"ca": _step(r, 50_000, 2_000_000, 5_000), "cl": _step(r, 20_000, 1_500_000, 5_000)},
            {"ca": money, "cl": money}, lambda v: v["ca"] / v["cl"],
            ("{who} reports current assets of {ca} against current liabilities of {cl}. What is its current ratio?",
             "With {cl} of short-term obligations and {ca} in current assets, compute the current ratio of {who}.")),
    Formula("Quick Ratio", "Quick Ratio = (Current Assets - Inventory) / Current Liabilities",
            "Inventory: goods held for sale, excluded because it is the least liquid current asset",
            lambda r: {"ca": _step(r, 200_000, 2_000_000, 10_000), "inv": _step(r, 10_000, 150_000, 5_000),
                       "cl": _step(r, 50_000, 900_000, 10_000)},
            {"ca": money, "inv": money, "cl": money}, lambda v: (v["ca"] - v["inv"]) / v["cl"],
            ("The balance sheet of {who} shows current assets of {ca}, of which {inv} is inventory, and current "
             "liabilities of {cl}. Find the quick ratio.",
             "Compute the acid-test ratio for {who}: current assets {ca}, inventory {inv}, current liabilities {cl}.")),
    Formula("Cash Ratio", "Cash Ratio = Cash and Cash Equivalents / Current Liabilities",
            "Cash and Cash Equivalents: cash plus short-term instruments convertible immediately",
            lambda r: {"cash": _step(r, 10_000, 800_000, 1_000), "cl": _step(r, 50_000, 1_000_000, 5_000)},
            {"cash": money, "cl": money}, lambda v: v["cash"] / v["cl"],
            ("{who} holds {cash} in cash and equivalents and owes {cl} in current liabilities. "
             "What is its cash ratio?",)),
    Formula("Debt-to-Equity Ratio", "D/E = Total Liabilities / Shareholders' Equity",
            "Total Liabilities: everything the company owes; Shareholders' Equity: assets minus liabilities",
            lambda r: {"tl": _step(r, 100_000, 5_000_000, 10_000), "eq": _step(r, 100_000, 5_000_000, 10_000)},
            {"tl": money, "eq": money}, lambda v: v["tl"] / v["eq"],
            ("{who} carries total liabilities of {tl} and shareholders' equity of {eq}. "
             "Calculate its debt-to-equity ratio.",
             "What is the D/E ratio of {who} if its equity is {eq} and its liabilities total {tl}?")),
    Formula("Debt Ratio", "Debt Ratio = Total Liabilities / Total Assets",
            "Total Assets: everything the company owns",
            lambda r: {"tl": _step(r, 100_000, 3_000_000, 10_000), "ta": _step(r, 3_000_000, 9_000_000, 10_000)},
            {"tl": money, "ta": money}, lambda v: v["tl"] / v["ta"],
            ("Total assets of {who} are {ta} and total liabilities are {tl}. What is the debt ratio?",)),
    Formula("Interest Coverage Ratio", "Interest Coverage = EBIT / Interest Expense",
            "EBIT: earnings before interest and taxes; Interest Expense: interest paid on debt in the period",
            lambda r: {"ebit": _step(r, 50_000, 3_000_000, 5_000), "int": _step(r, 5_000, 400_000, 1_000)},
            {"ebit": money, "int": money}, lambda v: v["ebit"] / v["int"],
            ("{who} earned {ebit} before interest and taxes and paid {int} in interest. How many times does EBIT "
             "cover the interest expense?",)),
    Formula("Gross Margin", "Gross Margin = ((Revenue - Cost of Goods Sold) / Revenue) x 100",
            "Revenue: total sales; Cost of Goods Sold: direct cost of what was sold",
            lambda r: _ratio(r, "rev", _step(r, 500_000, 5_000_000, 10_000), "cogs", 0.3, 0.9),
            {"rev": money, "cogs": money}, lambda v: (v["rev"] - v["cogs"]) / v["rev"] * 100,
            ("{who} sold goods for {rev} that cost {cogs} to produce. What is its gross margin in percent?",
             "Find the gross margin percentage of {who} with revenue of {rev} and cost of goods sold of {cogs}.")),
    Formula("Operating Margin", "Operating Margin = (Operating Income / Revenue) x 100",
            "Operating Income: profit from core operations before interest and taxes",
            lambda r: {"oi": _step(r, 10_000, 900_000, 1_000), "rev": _step(r, 1_000_000, 6_000_000, 10_000)},
            {"oi": money, "rev": money}, lambda v: v["oi"] / v["rev"] * 100,
            ("On revenue of {rev}, {who} made an operating income of {oi}. Compute its operating margin in percent.",)),
    Formula("Net Profit Margin", "Net Profit Margin = (Net Income / Revenue) x 100",
            "Net Income: profit after all expenses, interest and taxes",
            lambda r: {"ni": _step(r, 5_000, 600_000, 1_000), "rev": _step(r, 700_000, 8_000_000, 10_000)},
            {"ni": money, "rev": money}, lambda v: v["ni"] / v["rev"] * 100,
            ("{who} booked net income of {ni} on sales of {rev}. What is its net profit margin in percent?",)),
    Formula("Return on Assets", "ROA = (Net Income / Total Assets) x 100", "Total Assets: everything the company owns",
            lambda r: {"ni": _step(r, 5_000, 500_000, 1_000), "ta": _step(r, 600_000, 9_000_000, 10_000)},
            {"ni": money, "ta": money}, lambda v: v["ni"] / v["ta"] * 100,
            ("With total assets of {ta}, {who} produced net income of {ni}. "
             "Calculate its return on assets in percent.",)),
    Formula("Return on Equity", "ROE = (Net Income / Shareholders' Equity) x 100",
            "Shareholders' Equity: the owners' stake, assets minus liabilities",
            lambda r: {"ni": _step(r, 5_000, 500_000, 1_000), "eq": _step(r, 600_000, 5_000_000, 10_000)},
            {"ni": money, "eq": money}, lambda v: v["ni"] / v["eq"] * 100,
            ("{who} earned {ni} for owners whose equity stands at {eq}. What is the return on equity in percent?",)),
    Formula("Return on Investment", "ROI = (Final Value - Cost of Investment) / Cost of Investment",
            "Final Value: what the investment returned in total; Cost of Investment: what was paid for it",
            lambda r: {"cost": _step(r, 10_000, 400_000, 1_000), "final": _step(r, 10_000, 600_000, 1_000)},
            {"cost": money, "final": money}, lambda v: (v["final"] - v["cost"]) / v["cost"],
            ("An investor put {cost} into equipment for {who} and later realised {final} from it. What is the ROI "
             "as a fraction?",)),
    Formula("Earnings Per Share", "EPS = (Net Income - Preferred Dividends) / Weighted Average Common Shares",
            "Preferred Dividends: dividends owed to preferred shareholders; Weighted Average Common Shares: "
            "common shares outstanding over the period",
            lambda r: {"ni": _step(r, 100_000, 9_000_000, 10_000), "pref": _step(r, 0, 90_000, 5_000),
                       "shares": _step(r, 50_000, 2_000_000, 10_000)},
            {"ni": money, "pref": money, "shares": count}, lambda v: (v["ni"] - v["pref"]) / v["shares"],
            ("{who} reported net income of {ni}, paid {pref} in preferred dividends and had {shares} common shares "
             "outstanding on average. Compute its EPS.",)),
    Formula("Price-to-Earnings Ratio", "P/E = Share Price / Earnings Per Share",
            "Earnings Per Share: net income per common share",
            lambda r: _ratio(r, "eps", _step(r, 0.5, 20, 0.05), "price", 4, 45),
            {"price": money, "eps": money}, lambda v: v["price"] / v["eps"],
            ("Shares of {who} trade at {price} and its earnings per share are {eps}. What is its P/E ratio?",)),
    Formula("Price-to-Book Ratio", "P/B = Share Price / Book Value per Share",
            "Book Value per Share: shareholders' equity divided by shares outstanding",
            lambda r: _ratio(r, "bvps", _step(r, 2, 120, 0.5), "price", 0.4, 8),
            {"price": money, "bvps": money}, lambda v: v["price"] / v["bvps"],
            ("A share of {who} costs {price}; its book value per share is {bvps}. Find the price-to-book ratio.",)),
    Formula("Dividend Yield", "Dividend Yield = Annual Dividend per Share / Share Price",
            "Annual Dividend per Share: dividends paid on one share over a year",
            lambda r: _ratio(r, "div", _step(r, 0.2, 8, 0.05), "price", 12, 200),
            {"div": money, "price": money}, lambda v: v["div"] / v["price"],
            ("{who} pays {div} per share in annual dividends and its stock trades at {price}. What is the dividend "
             "yield as a fraction?",)),
    Formula("Dividend Payout Ratio", "Payout Ratio = Dividends Paid / Net Income",
            "Dividends Paid: cash dividends distributed to shareholders in the year",
            lambda r: {"div": _step(r, 5_000, 300_000, 1_000), "ni": _step(r, 300_000, 2_000_000, 10_000)},
            {"div": money, "ni": money}, lambda v: v["div"] / v["ni"],
            ("Out of net income of {ni}, {who} distributed {div} as dividends. "
             "Compute the payout ratio as a fraction.",)),
    Formula("Inventory Turnover", "Inventory Turnover = Cost of Goods Sold / Average Inventory",
            "Average Inventory: mean of opening and closing inventory",
            lambda r: {"cogs": _step(r, 100_000, 5_000_000, 10_000), "inv": _step(r, 20_000, 900_000, 5_000)},
            {"cogs": money, "inv": money}, lambda v: v["cogs"] / v["inv"],
            ("{who} had cost of goods sold of {cogs} and average inventory of {inv}. "
             "How many times did inventory turn over?",)),
    Formula("Days Inventory Outstanding", "DIO = (Average Inventory / Cost of Goods Sold) x 365",
            "365: days in the year",
            lambda r: {"inv": _step(r, 20_000, 900_000, 5_000), "cogs": _step(r, 900_000, 6_000_000, 10_000)},
            {"inv": money, "cogs": money}, lambda v: v["inv"] / v["cogs"] * 365,
            ("With average inventory of {inv} and annual cost of goods sold of {cogs}, how many days does {who} hold "
             "its inventory?",)),
    Formula("Receivables Turnover", "Receivables Turnover = Net Credit Sales / Average Accounts Receivable",
            "Net Credit Sales: sales made on credit, net of returns",
            lambda r: {"sales": _step(r, 200_000, 6_000_000, 10_000), "ar": _step(r, 20_000, 700_000, 5_000)},
            {"sales": money, "ar": money}, lambda v: v["sales"] / v["ar"],
            ("{who} sold {sales} on credit and carried average receivables of {ar}. "
             "Compute the receivables turnover.",)),
    Formula("Days Sales Outstanding", "DSO = (Accounts Receivable / Credit Sales) x Days in Period",
            "Days in Period: length of the period the sales cover",
            lambda r: {"ar": _step(r, 10_000, 500_000, 1_000), "sales": _step(r, 500_000, 5_000_000, 10_000),
                       "days": float(r.choice((30, 90, 180, 365)))},
            {"ar": money, "sales": money, "days": count}, lambda v: v["ar"] / v["sales"] * v["days"],
            ("Over a {days}-day period {who} made credit sales of {sales} and ended with receivables of {ar}. "
             "What is its DSO?",)),
    Formula("Asset Turnover", "Asset Turnover = Revenue / Average Total Assets",
            "Average Total Assets: mean of opening and closing total assets",
            lambda r: {"rev": _step(r, 200_000, 8_000_000, 10_000), "ta": _step(r, 300_000, 6_000_000, 10_000)},
            {"rev": money, "ta": money}, lambda v: v["rev"] / v["ta"],
            ("{who} generated revenue of {rev} using average total assets of {ta}. What is its asset turnover?",)),
    Formula("Working Capital", "Working Capital = Current Assets - Current Liabilities",
            "Both measured at the balance sheet date",
            lambda r: {"ca": _step(r, 50_000, 3_000_000, 1_000), "cl": _step(r, 50_000, 3_000_000, 1_000)},
            {"ca": money, "cl": money}, lambda v: v["ca"] - v["cl"],
            ("{who} lists current assets of {ca} and current liabilities of {cl}. "
             "How much working capital does it have?",)),
    Formula("Free Cash Flow", "FCF = Operating Cash Flow - Capital Expenditures",
            "Operating Cash Flow: cash generated by operations; Capital Expenditures: cash spent on long-lived assets",
            lambda r: {"ocf": _step(r, 50_000, 4_000_000, 1_000), "capex": _step(r, 10_000, 2_000_000, 1_000)},
            {"ocf": money, "capex": money}, lambda v: v["ocf"] - v["capex"],
            ("Operations brought {who} {ocf} in cash while it spent {capex} on new equipment. "
             "What is its free cash flow?",)),
    Formula("Enterprise Value", "EV = Market Capitalization + Total Debt - Cash",
            "Market Capitalization: value of all shares; Cash: cash and equivalents",
            lambda r: {"cap": float(r.randint(50, 900)), "debt": float(r.randint(5, 300)),
                       "cash": float(r.randint(1, 120))},
            {"cap": millions, "debt": millions, "cash": millions}, lambda v: (v["cap"] + v["debt"] - v["cash"]) * 1e6,
            ("{who} has a market capitalization of {cap}, debt of {debt} and cash of {cash}. What is its enterprise "
             "value in dollars?",)),
    Formula("EV/EBITDA", "EV/EBITDA = Enterprise Value / EBITDA",
            "EBITDA: earnings before interest, taxes, depreciation and amortization",
            lambda r: {"ev": float(r.randint(100, 2_000)), "ebitda": float(r.randint(10, 300))},
            {"ev": millions, "ebitda": millions}, lambda v: v["ev"] / v["ebitda"],
            ("The enterprise value of {who} is {ev} and its EBITDA is {ebitda}. What is its EV/EBITDA multiple?",)),
    Formula("Market Capitalization", "Market Cap = Shares Outstanding x Share Price",
            "Shares Outstanding: common shares held by investors",
            lambda r: {"shares": _step(r, 100_000, 20_000_000, 10_000), "price": _step(r, 1, 200, 0.25)},
            {"shares": count, "price": money}, lambda v: v["shares"] * v["price"],
            ("{who} has {shares} shares outstanding priced at {price} each. What is its market capitalization?",)),
    Formula("Simple Interest", "I = P x r x t", "P: principal; r: annual interest rate; t: time in years",
            lambda r: {"p": _step(r, 1_000, 200_000, 500), "rate": _step(r, 1, 12, 0.25), "t": float(r.randint(1, 10))},
            {"p": money, "rate": pct, "t": count}, lambda v: v["p"] * v["rate"] / 100 * v["t"],
            ("{who} lends {p} at a simple annual rate of {rate} for {t} years. How much interest does it earn?",)),
    Formula("Compound Interest", "A = P x (1 + r/n)^(n x t)",
            "P: principal; r: annual rate; n: compounding periods per year; t: years",
            lambda r: {"p": _step(r, 1_000, 100_000, 500), "rate": _step(r, 1, 10, 0.25),
                       "n": float(r.choice((1, 2, 4, 12))), "t": float(r.randint(1, 20))},
            {"p": money, "rate": pct, "n": times, "t": count},
            lambda v: v["p"] * (1 + v["rate"] / 100 / v["n"]) ** (v["n"] * v["t"]),
            ("{who} deposits {p} at {rate} a year compounded {n} a year. What is the balance after {t} years?",)),
    Formula("Future Value", "FV = PV x (1 + r)^n",
            "PV: amount invested today; r: rate per period; n: number of periods",
            lambda r: {"pv": _step(r, 1_000, 250_000, 500), "rate": _step(r, 1, 12, 0.5), "n": float(r.randint(1, 30))},
            {"pv": money, "rate": pct, "n": count}, lambda v: v["pv"] * (1 + v["rate"] / 100) ** v["n"],
            ("If {who} invests {pv} today at {rate} per year, what will it be worth in {n} years?",)),
    Formula("Present Value", "PV = FV / (1 + r)^n",
            "FV: amount received in the future; r: discount rate per period; n: periods",
            lambda r: {"fv": _step(r, 1_000, 500_000, 500), "rate": _step(r, 1, 12, 0.5), "n": float(r.randint(1, 30))},
            {"fv": money, "rate": pct, "n": count}, lambda v: v["fv"] / (1 + v["rate"] / 100) ** v["n"],
            ("{who} expects to receive {fv} in {n} years. At a discount rate of {rate}, what is that worth today?",)),
    Formula("Net Present Value", "NPV = -C0 + CF1/(1 + r) + CF2/(1 + r)^2 + CF3/(1 + r)^3",
            "C0: initial outlay; CFt: cash flow at the end of year t; r: discount rate", _cash_flows,
            {"c0": money, "cf1": money, "cf2": money, "cf3": money, "rate": pct},
            lambda v: -v["c0"] + sum(v[f"cf{t}"] / (1 + v["rate"] / 100) ** t for t in (1, 2, 3)),
            ("{who} spends {c0} on a project that returns {cf1}, {cf2} and {cf3} at the end of years 1 to 3. "
             "At a discount rate of {rate}, what is the project's NPV?",)),
    Formula("Effective Annual Rate", "EAR = (1 + r/n)^n - 1", "r: nominal annual rate; n: compounding periods per year",
            lambda r: {"rate": _step(r, 1, 30, 0.5), "n": float(r.choice((2, 4, 12, 365)))},
            {"rate": pct, "n": times}, lambda v: ((1 + v["rate"] / 100 / v["n"]) ** v["n"] - 1) * 100,
            ("A credit line offered to {who} charges a nominal {rate} compounded {n} a year. What is the "
             "effective annual rate in percent?",)),
    Formula("Capital Asset Pricing Model", "E(R) = Rf + Beta x (Rm - Rf)",
            "Rf: risk-free rate; Beta: sensitivity to the market; Rm: expected market return",
            lambda r: {"rf": _step(r, 0.5, 5, 0.1), "beta": _step(r, 0.3, 2.2, 0.05), "rm": _step(r, 5, 14, 0.1)},
            {"rf": pct, "beta": plain, "rm": pct}, lambda v: v["rf"] + v["beta"] * (v["rm"] - v["rf"]),
            ("The stock of {who} has a beta of {beta}. With a risk-free rate of {rf} and an expected market return of "
             "{rm}, what return (in percent) does CAPM predict?",)),
    Formula("Sharpe Ratio", "Sharpe = (Rp - Rf) / Sigma_p",
            "Rp: portfolio return; Rf: risk-free rate; Sigma_p: standard deviation of the portfolio's returns",
            lambda r: {"rp": _step(r, 4, 25, 0.5), "rf": _step(r, 0.5, 4, 0.25), "sd": _step(r, 3, 30, 0.5)},
            {"rp": pct, "rf": pct, "sd": pct}, lambda v: (v["rp"] - v["rf"]) / v["sd"],
            ("The pension fund of {who} returned {rp} with a volatility of {sd} while the risk-free rate was {rf}. "
             "What is its Sharpe ratio?",)),
    Formula("Treynor Ratio", "Treynor = (Rp - Rf) / Beta_p",
            "Rp: portfolio return in percent; Rf: risk-free rate in percent; Beta_p: portfolio beta",
            lambda r: {"rp": _step(r, 4, 25, 0.5), "rf": _step(r, 0.5, 4, 0.25), "beta": _step(r, 0.5, 2, 0.05)},
            {"rp": pct, "rf": pct, "beta": plain}, lambda v: (v["rp"] - v["rf"]) / v["beta"],
            ("A portfolio managed for {who} earned {rp} with a beta of {beta}; the risk-free rate was {rf}. "
             "Compute the Treynor ratio in percentage points per unit of beta.",)),
    Formula("Gordon Growth Model", "P0 = D1 / (r - g)",
            "D1: dividend expected next year; r: required return; g: constant dividend growth rate",
            lambda r: {"d1": _step(r, 0.5, 6, 0.05), "req": _step(r, 7, 14, 0.5), "g": _step(r, 1, 6, 0.5)},
            {"d1": money, "req": pct, "g": pct}, lambda v: v["d1"] / ((v["req"] - v["g"]) / 100),
            ("{who} will pay a dividend of {d1} next year, growing {g} a year forever. If investors require {req}, "
             "what is a share worth today?",)),
    Formula("Break-Even Units", "Break-Even Units = Fixed Costs / (Price per Unit - Variable Cost per Unit)",
            "Fixed Costs: costs that do not vary with output",
            lambda r: {"fixed": _step(r, 10_000, 900_000, 1_000), "price": _step(r, 20, 200, 1),
                       "var": _step(r, 5, 19, 1)},
            {"fixed": money, "price": money, "var": money}, lambda v: v["fixed"] / (v["price"] - v["var"]),
            ("{who} has fixed costs of {fixed}, sells each unit for {price} and spends {var} per unit on materials. "
             "How many units must it sell to break even?",)),
    Formula("Payback Period", "Payback Period = Initial Investment / Annual Cash Inflow",
            "Annual Cash Inflow: the equal cash the investment returns each year",
            lambda r: {"inv": _step(r, 10_000, 2_000_000, 5_000), "cf": _step(r, 5_000, 600_000, 1_000)},
            {"inv": money, "cf": money}, lambda v: v["inv"] / v["cf"],
            ("A machine bought by {who} for {inv} saves {cf} a year. How many years until it pays for itself?",)),
    Formula("Loan Payment", "PMT = P x i / (1 - (1 + i)^(-N))",
            "P: loan amount; i: monthly rate (annual rate / 12); N: number of monthly payments",
            lambda r: {"p": _step(r, 5_000, 500_000, 1_000), "rate": _step(r, 2, 12, 0.25),
                       "years": float(r.randint(1, 30))},
            {"p": money, "rate": pct, "years": count},
            lambda v: v["p"] * (v["rate"] / 1200) / (1 - (1 + v["rate"] / 1200) ** (-12 * v["years"])),
            ("{who} borrows {p} at {rate} a year, repaid monthly over {years} years. What is the monthly payment?",)),
    Formula("Inflation Rate", "Inflation = ((CPI this year - CPI last year) / CPI last year) x 100",
            "CPI: consumer price index",
            lambda r: _ratio(r, "last", _step(r, 100, 300, 0.5), "now", 0.98, 1.12),
            {"last": plain, "now": plain}, lambda v: (v["now"] - v["last"]) / v["last"] * 100,
            ("The price index used by {who} for wage talks moved from {last} last year to {now} this year. What was "
             "the inflation rate in percent?",)),
    Formula("Unemployment Rate", "Unemployment Rate = (Unemployed / Labor Force) x 100",
            "Labor Force: people employed plus people looking for work",
            lambda r: {"u": _step(r, 1_000, 90_000, 100), "lf": _step(r, 100_000, 2_000_000, 1_000)},
            {"u": count, "lf": count}, lambda v: v["u"] / v["lf"] * 100,
            ("In the town where {who} is based, {u} people are unemployed out of a labor force of {lf}. What is the "
             "unemployment rate in percent?",)),
    Formula("Balance of Trade", "Balance of Trade = Exports - Imports",
            "Exports and imports of goods over the same period",
            lambda r: {"x": float(r.randint(10, 900)), "m": float(r.randint(10, 900))},
            {"x": millions, "m": millions}, lambda v: (v["x"] - v["m"]) * 1e6,
            ("A small economy exported {x} of goods and imported {m}, much of it through {who}. What is its balance "
             "of trade in dollars?",)),
    Formula("Weighted Average Cost of Capital", "WACC = (E/V) x Re + (D/V) x Rd x (1 - Tc)",
            "E: equity; D: debt; V = E + D; Re: cost of equity; Rd: cost of debt; Tc: corporate tax rate",
            lambda r: {"e": _step(r, 100_000, 5_000_000, 10_000), "d": _step(r, 50_000, 3_000_000, 10_000),
                       "re": _step(r, 6, 16, 0.5), "rd": _step(r, 2, 9, 0.25), "tc": _step(r, 10, 35, 1)},
            {"e": money, "d": money, "re": pct, "rd": pct, "tc": pct},
            lambda v: (v["e"] * v["re"] + v["d"] * v["rd"] * (1 - v["tc"] / 100)) / (v["e"] + v["d"]),
            ("{who} is funded by {e} of equity costing {re} and {d} of debt costing {rd}; its tax rate is {tc}. "
             "What is its WACC in percent?",)),
    Formula("Rule of 72", "Years to Double = 72 / Annual Rate in percent", "An approximation for compound growth",
            lambda r: {"rate": _step(r, 1, 24, 0.5)}, {"rate": pct}, lambda v: 72 / v["rate"],
            ("Using the rule of 72, how many years does money invested by {who} at {rate} a year take to double?",)),
)


def formula_task(seed: int) -> tuple[str, str, str]:
    """Return (formula name, context, target) for the generated Formula task with this seed."""
    rng = random.Random(f"finance-formula:{seed}")
    formula = rng.choice(FORMULAS)
    values = formula.sample(rng)
    while _degenerate(formula, values):
        values = formula.sample(rng)
    shown = {name: render(values[name]) for name, render in formula.show.items()}
    question = rng.choice(formula.questions).format(who=rng.choice(WHO), **shown)
    question = question[0].upper() + question[1:]
    context = (f"Financial formula: {formula.name}\n"
               f"Formula: {formula.expression}\n"
               f"Where: {formula.variables}\n"
               f"Question: {question}\n"
               "Reply with the result as a plain number rounded to 2 decimal places (e.g. 1234.57), "
               "with no currency symbols, percent signs, units or words.")
    return formula.name, context, benchmark_round(formula.compute(values))


def _degenerate(formula: Formula, values: Values) -> bool:
    """True for draws that would make a pointless or ill-defined question (a result that rounds to 0, r - g < 1%)."""
    try:
        result = formula.compute(values)
    except ZeroDivisionError:
        return True
    if "g" in values and "req" in values and values["req"] - values["g"] < 1:
        return True
    return round(result, 2) == 0 or abs(result) >= 1e13
