"""Generated tagging tasks in the style of FiNER: numbers in filing-like sentences to tag.

A task shows a list of US GAAP XBRL element names (the tag list), then numbered items,
each quoting a value and the sentence it appears in; the answer is one tag per item,
comma-separated, in item order. Sentences come from templates with random values; each
template knows the gold tag of each value it contains. The element names are public
US GAAP taxonomy identifiers; the sentences and instructions are written for this project.
"""

from __future__ import annotations

import random
from typing import Callable

QUESTIONS_PER_TASK = 4
YEARS = tuple(range(2015, 2024))
MONTHS = ("January", "March", "May", "June", "August", "October", "November")

Draw = Callable[[random.Random], str]


def millions(rng: random.Random) -> str:
    """A dollar amount in millions with one decimal, e.g. "12.4"."""
    return f"{rng.randint(5, 9_000) / 10:,.1f}"


def percent(low: float, high: float, decimals: int = 1) -> Draw:
    """A percentage between `low` and `high`, e.g. "34.6"."""
    scale = 10 ** decimals
    return lambda rng: f"{rng.randint(round(low * scale), round(high * scale)) / scale:.{decimals}f}"


def whole(low: int, high: int, step: int = 1) -> Draw:
    """A whole number with thousands separators, e.g. "1,250,000"."""
    return lambda rng: f"{rng.randrange(low, high + 1, step):,}"


def choice(*options: str) -> Draw:
    """One of the given values."""
    return lambda rng: rng.choice(options)


# (sentence with {a} / {b} for the values, {year} / {month} for dates) -> ((gold tag, draw), ...)
TEMPLATES: tuple[tuple[str, tuple[tuple[str, Draw], ...]], ...] = (
    ("Total revenue for fiscal {year} was ${a} million, up from the prior year.", (("Revenues", millions),)),
    ("Cost of revenue rose to ${a} million as freight rates increased.", (("CostOfRevenue", millions),)),
    ("Gross profit for the quarter amounted to ${a} million.", (("GrossProfit", millions),)),
    ("Operating income was ${a} million for the year ended December 31, {year}.", (("OperatingIncomeLoss", millions),)),
    ("The Company recorded net income of ${a} million in {year}.", (("NetIncomeLoss", millions),)),
    ("Income tax expense for {year} was ${a} million.", (("IncomeTaxExpenseBenefit", millions),)),
    ("Our effective tax rate was {a}% in {year}, compared with the federal statutory rate of {b}%.",
     (("EffectiveIncomeTaxRateContinuingOperations", percent(5, 40)),
      ("EffectiveIncomeTaxRateReconciliationAtFederalStatutoryIncomeTaxRate", choice("21", "35")))),
    ("Interest expense on borrowings totaled ${a} million during the year.", (("InterestExpense", millions),)),
    ("In {month} {year}, the Company issued ${a} million aggregate principal amount of senior notes bearing "
     "interest at {b}% per annum.",
     (("DebtInstrumentFaceAmount", whole(100, 2_000, 50)),
      ("DebtInstrumentInterestRateStatedPercentage", percent(1, 9, 3)))),
    ("Borrowings under the term loan bear interest at LIBOR plus a margin of {a}%.",
     (("DebtInstrumentBasisSpreadOnVariableRate1", choice("1.00", "1.25", "1.50", "1.75", "2.00", "2.25", "2.50",
                                                          "3.00")),)),
    ("The revolving credit facility provides for borrowings of up to ${a} million, of which ${b} million remained "
     "available at year end.",
     (("LineOfCreditFacilityMaximumBorrowingCapacity", whole(200, 1_500, 50)),
      ("LineOfCreditFacilityRemainingBorrowingCapacity", whole(20, 190, 5)))),
    ("Long-term debt outstanding was ${a} million as of December 31, {year}.", (("LongTermDebt", millions),)),
    ("At year end we held cash and cash equivalents of ${a} million.",
     (("CashAndCashEquivalentsAtCarryingValue", millions),)),
    ("Goodwill recorded on the balance sheet totaled ${a} million.", (("Goodwill", millions),)),
    ("Amortization expense for intangible assets was ${a} million for the year.",
     (("AmortizationOfIntangibleAssets", millions),)),
    ("Depreciation expense amounted to ${a} million in {year}.", (("Depreciation", millions),)),
    ("Stock-based compensation expense recognized during the year was ${a} million.",
     (("ShareBasedCompensation", millions),)),
    ("The Company's charter authorizes {a} shares of common stock.",
     (("CommonStockSharesAuthorized", choice("100,000,000", "200,000,000", "300,000,000", "500,000,000",
                                             "1,000,000,000")),)),
    ("As of the filing date, {a} shares of common stock were outstanding.",
     (("CommonStockSharesOutstanding", whole(5_000_000, 90_000_000, 1_317)),)),
    ("Each share of common stock has a par value of ${a}.",
     (("CommonStockParOrStatedValuePerShare", choice("0.01", "0.001", "0.0001")),)),
    ("The Board approved a share repurchase program of up to ${a} million.",
     (("StockRepurchaseProgramAuthorizedAmount1", whole(25, 2_000, 25)),)),
    ("During the quarter we bought back {a} shares, which are held in treasury.",
     (("TreasuryStockSharesAcquired", whole(10_000, 3_000_000, 113)),)),
    ("Cash dividends paid to shareholders totaled ${a} million in {year}.", (("PaymentsOfDividends", millions),)),
    ("The Board declared a quarterly dividend of ${a} per share.",
     (("CommonStockDividendsPerShareDeclared", choice("0.05", "0.10", "0.12", "0.15", "0.20", "0.25", "0.32", "0.40",
                                                      "0.55")),)),
    ("On adoption of the new lease standard we recognized right-of-use assets of ${a} million and lease liabilities "
     "of ${b} million.", (("OperatingLeaseRightOfUseAsset", millions), ("OperatingLeaseLiability", millions))),
    ("The weighted average remaining term of our operating leases is {a} years.",
     (("OperatingLeaseWeightedAverageRemainingLeaseTerm1", percent(1, 15)),)),
    ("The weighted average discount rate applied to operating leases was {a}%.",
     (("OperatingLeaseWeightedAverageDiscountRatePercent", percent(2, 8)),)),
    ("The Company manages its business in {a} reportable segments.",
     (("NumberOfReportableSegments", choice("two", "3", "4", "5", "6")),)),
    ("The portfolio consists of {a} properties totaling approximately {b} million square feet.",
     (("NumberOfRealEstateProperties", whole(12, 400)), ("AreaOfRealEstateProperty", percent(1, 60)))),
    ("Total consideration paid for the acquisition was ${a} million.",
     (("BusinessCombinationConsiderationTransferred1", millions),)),
    ("We acquired {a}% of the voting shares of the target company.",
     (("BusinessAcquisitionPercentageOfVotingInterestsAcquired", choice("51", "60", "75", "80", "100")),)),
    ("The Company holds a {a}% interest in the joint venture, accounted for under the equity method.",
     (("EquityMethodInvestmentOwnershipPercentage", percent(20, 49)),)),
    ("One customer accounted for {a}% of net sales in {year}.", (("ConcentrationRiskPercentage1", percent(10, 45)),)),
    ("Unrecognized tax benefits at year end were ${a} million.", (("UnrecognizedTaxBenefits", millions),)),
    ("We recorded impairment charges of ${a} million on long-lived assets.", (("AssetImpairmentCharges", millions),)),
    ("Restructuring charges of ${a} million were incurred in connection with the plant closure.",
     (("RestructuringCharges", millions),)),
    ("Company contributions to the employee savings plan were ${a} million for the year.",
     (("DefinedContributionPlanCostRecognized", millions),)),
    ("Research and development expense increased to ${a} million.", (("ResearchAndDevelopmentExpense", millions),)),
    ("Advertising costs, expensed as incurred, were ${a} million.", (("AdvertisingExpense", millions),)),
    ("We wrote down obsolete inventory by ${a} million during the fourth quarter.",
     (("InventoryWriteDown", millions),)),
)

TAGS: tuple[str, ...] = tuple(tag for _, slots in TEMPLATES for tag, _ in slots)


def _items(rng: random.Random) -> list[tuple[str, str, str]]:
    """Draw (value, sentence, gold tag) items until there are `QUESTIONS_PER_TASK`."""
    items: list[tuple[str, str, str]] = []
    order = list(TEMPLATES)
    rng.shuffle(order)
    for sentence, slots in order:
        if len(items) + len(slots) > QUESTIONS_PER_TASK:
            continue
        values = [draw(rng) for _, draw in slots]
        while len(set(values)) < len(values):  # two equal values in one sentence would be ambiguous
            values = [draw(rng) for _, draw in slots]
        text = sentence.format(year=rng.choice(YEARS), month=rng.choice(MONTHS), **dict(zip("ab", values)))
        items += [(value, text, tag) for value, (tag, _) in zip(values, slots)]
        if len(items) == QUESTIONS_PER_TASK:
            break
    return items


def tagging_task(seed: int) -> tuple[str, str]:
    """Return (context, target) for the generated tagging task with this seed."""
    rng = random.Random(f"finance-finer:{seed}")
    items = _items(rng)
    lines = ["Tag the numeric facts below with US GAAP XBRL elements.",
             f"Tag list: {','.join(TAGS)}",
             "For each numbered item, choose the one tag from the list that best describes the quoted value "
             "in its sentence."]
    lines += [f'{n}. Value "{value}" in: "{sentence}"' for n, (value, sentence, _) in enumerate(items, 1)]
    lines.append(f"Reply with exactly {len(items)} tags separated by commas, in item order, and nothing else.")
    return "\n".join(lines), ",".join(tag for _, _, tag in items)
