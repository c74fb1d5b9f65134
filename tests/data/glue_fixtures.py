"""A few rows of every GLUE task, SNLI and SWAG in the distributed files' exact layouts.

Headers, column order, tabs and unquoted `"` are the real files'; the rows are real
ones as far as memory serves (the second SWAG row is made up to exercise CSV quoting).
`write(tmp_path, task, split)` writes one.
"""

import os

T = "\t"
MNLI_PARSES = "( x )\t( y )\t(ROOT x)\t(ROOT y)"

# task -> split -> (text written, expected x, expected labels or None)
GLUE = {
    "cola": {
        "train": (
            "gj04\t1\t\tOur friends won't buy this analysis, let alone the next one we propose.\n"
            "gj04\t0\t*\tOne more pseudo generalization and I'm giving up.\n",
            ["Our friends won't buy this analysis, let alone the next one we propose.",
             "One more pseudo generalization and I'm giving up."],
            [1, 0],
        ),
        "test": ("index\tsentence\n0\tBill whistled past the house.\n", ["Bill whistled past the house."], None),
    },
    "sst2": {
        "train": (
            "sentence\tlabel\nhide new secretions from the parental units \t0\n"
            "that loves its characters and communicates something rather beautiful about human nature \t1\n",
            ["hide new secretions from the parental units ",
             "that loves its characters and communicates something rather beautiful about human nature "],
            [0, 1],
        ),
        "test": ("index\tsentence\n0\tuneasy mishmash of styles and genres .\n",
                 ["uneasy mishmash of styles and genres ."], None),
    },
    "mrpc": {
        "train": (
            "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
            '1\t702876\t702977\tAmrozi accused his brother , whom he called " the witness " , of deliberately '
            'distorting his evidence .\tReferring to him as only " the witness " , Amrozi accused his brother '
            "of deliberately distorting his evidence .\n"
            "0\t2108705\t2108831\tYucaipa owned Dominick 's before selling the chain to Safeway in 1998 for "
            "$ 2.5 billion .\tYucaipa bought Dominick 's in 1995 for $ 693 million and sold it to Safeway for "
            "$ 1.8 billion in 1998 .\n",
            (['Amrozi accused his brother , whom he called " the witness " , of deliberately distorting his '
              "evidence .",
              "Yucaipa owned Dominick 's before selling the chain to Safeway in 1998 for $ 2.5 billion ."],
             ['Referring to him as only " the witness " , Amrozi accused his brother of deliberately '
              "distorting his evidence .",
              "Yucaipa bought Dominick 's in 1995 for $ 693 million and sold it to Safeway for $ 1.8 billion "
              "in 1998 ."]),
            [1, 0],
        ),
        "test": (
            "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
            "0\t1089874\t1089925\tPCCW 's chief operating officer , Mike Butcher , and Alex Arena , the chief "
            "financial officer , will report directly to Mr So .\tCurrent Chief Operating Officer Mike Butcher "
            "and Group Chief Financial Officer Alex Arena will report to So .\n",
            (["PCCW 's chief operating officer , Mike Butcher , and Alex Arena , the chief financial officer , "
              "will report directly to Mr So ."],
             ["Current Chief Operating Officer Mike Butcher and Group Chief Financial Officer Alex Arena will "
              "report to So ."]),
            None,
        ),
    },
    "qqp": {
        "train": (
            "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
            "133273\t213221\t213222\tHow is the life of a math student? Could you describe your own "
            "experiences?\tWhich level of prepration is enough for the exam jlpt5?\t0\n"
            "402555\t536040\t536041\tHow do I control my horny emotions?\tHow do you control your horniness?\t1\n",
            (["How is the life of a math student? Could you describe your own experiences?",
              "How do I control my horny emotions?"],
             ["Which level of prepration is enough for the exam jlpt5?", "How do you control your horniness?"]),
            [0, 1],
        ),
        "test": ("id\tquestion1\tquestion2\n0\tWhy am I mentally very lonely? How can I solve it?\t"
                 "Find the remainder when [math]23^{24}[/math] is divided by 24,23?\n",
                 (["Why am I mentally very lonely? How can I solve it?"],
                  ["Find the remainder when [math]23^{24}[/math] is divided by 24,23?"]), None),
    },
    "stsb": {
        "train": (
            "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
            "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking off.\t"
            "An air plane is taking off.\t5.000\n"
            "1\tmain-captions\tMSRvid\t2012test\t0004\tnone\tnone\tA man is playing a large flute.\t"
            "A man is playing a flute.\t3.800\n",
            (["A plane is taking off.", "A man is playing a large flute."],
             ["An air plane is taking off.", "A man is playing a flute."]),
            [5.0, 3.8],
        ),
        "test": (
            "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\n"
            "0\tmain-captions\tMSRvid\t2012test\t0024\tnone\tnone\tA girl is styling her hair.\t"
            "A girl is brushing her hair.\n",
            (["A girl is styling her hair."], ["A girl is brushing her hair."]), None),
    },
    "mnli": {
        "train": (
            "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
            "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
            f"0\t31193\t31193n\tgovernment\t{MNLI_PARSES}\tConceptually cream skimming has two basic dimensions "
            "- product and geography.\tProduct and geography are what make cream skimming work. \tneutral\tneutral\n",
            (["Conceptually cream skimming has two basic dimensions - product and geography."],
             ["Product and geography are what make cream skimming work. "]),
            [2],
        ),
        "dev": (
            "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
            "sentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n"
            f"0\t63735\t63735n\tslate\t{MNLI_PARSES}\tThe new rights are nice enough\tEveryone really likes the "
            "newest benefits \tneutral\tentailment\tneutral\tneutral\tneutral\tneutral\n"
            f"1\t91383\t91383c\tgovernment\t{MNLI_PARSES}\tThis site includes a list of all award winners.\t"
            "The Government Executive articles housed on the website are not able to be searched .\t"
            "contradiction\tcontradiction\tcontradiction\tcontradiction\tcontradiction\tcontradiction\n",
            (["The new rights are nice enough", "This site includes a list of all award winners."],
             ["Everyone really likes the newest benefits ",
              "The Government Executive articles housed on the website are not able to be searched ."]),
            [2, 0],
        ),
        "test": (
            "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
            "sentence2_parse\tsentence1\tsentence2\n"
            f"0\t31493\t31493\ttravel\t{MNLI_PARSES}\tHierbas, ans seco, ans dulce, and frigola are just a few "
            "names worth keeping a look-out for.\tHierbas is a name worth looking out for.\n",
            (["Hierbas, ans seco, ans dulce, and frigola are just a few names worth keeping a look-out for."],
             ["Hierbas is a name worth looking out for."]), None),
    },
    "qnli": {
        "train": (
            "index\tquestion\tsentence\tlabel\n"
            "0\tWhen did the third Digimon series begin?\tUnlike the two seasons before it and most of the "
            "seasons that followed, Digimon Tamers takes a darker and more realistic approach to its story "
            "featuring Digimon who do not reincarnate after their deaths and more complex character "
            "development in the original Japanese.\tnot_entailment\n",
            (["When did the third Digimon series begin?"],
             ["Unlike the two seasons before it and most of the seasons that followed, Digimon Tamers takes a "
              "darker and more realistic approach to its story featuring Digimon who do not reincarnate after "
              "their deaths and more complex character development in the original Japanese."]),
            [1],
        ),
        "test": ("index\tquestion\tsentence\n0\tWhat organization is devoted to Jihad against Israel?\t"
                 "For some decades prior to the First Palestine Intifada in 1987, the Muslim Brotherhood in "
                 "Palestine took a \"quiescent\" stance towards Israel.\n",
                 (["What organization is devoted to Jihad against Israel?"],
                  ['For some decades prior to the First Palestine Intifada in 1987, the Muslim Brotherhood in '
                   'Palestine took a "quiescent" stance towards Israel.']), None),
    },
    "rte": {
        "train": (
            "index\tsentence1\tsentence2\tlabel\n"
            "0\tNo Weapons of Mass Destruction Found in Iraq Yet.\tWeapons of Mass Destruction Found in "
            "Iraq.\tnot_entailment\n"
            "1\tA place of sorrow, after Pope John Paul II died, became a place of celebration.\tPope "
            "Benedict XVI is the new leader of the Roman Catholic Church.\tentailment\n",
            (["No Weapons of Mass Destruction Found in Iraq Yet.",
              "A place of sorrow, after Pope John Paul II died, became a place of celebration."],
             ["Weapons of Mass Destruction Found in Iraq.",
              "Pope Benedict XVI is the new leader of the Roman Catholic Church."]),
            [1, 0],
        ),
        "test": ("index\tsentence1\tsentence2\n0\tMangla was summoned after Madhumita's sister Nidhi Shukla, "
                 "who was the first witness in the case.\tShukla is related to Mangla.\n",
                 (["Mangla was summoned after Madhumita's sister Nidhi Shukla, who was the first witness in "
                   "the case."], ["Shukla is related to Mangla."]), None),
    },
    "wnli": {
        "train": (
            "index\tsentence1\tsentence2\tlabel\n"
            "0\tI stuck a pin through a carrot. When I pulled the pin out, it had a hole.\tThe carrot had a "
            "hole.\t1\n",
            (["I stuck a pin through a carrot. When I pulled the pin out, it had a hole."],
             ["The carrot had a hole."]),
            [1],
        ),
        "test": ("index\tsentence1\tsentence2\n0\tMaude and Dora had seen the trains rushing across the "
                 "prairie.\tThe trains had seen the trains rushing across the prairie.\n",
                 (["Maude and Dora had seen the trains rushing across the prairie."],
                  ["The trains had seen the trains rushing across the prairie."]), None),
    },
    # SNLI 1.0's .txt files: 14 columns, parses before the sentences, five annotators' labels; a row whose
    # annotators had no majority has gold_label "-" and is dropped (the third row here).
    "snli": {
        "train": (
            "gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\t"
            "sentence1\tsentence2\tcaptionID\tpairID\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\n"
            f"neutral\t{MNLI_PARSES}\tA person on a horse jumps over a broken down airplane.\t"
            "A person is training his horse for a competition.\t3416050480.jpg#4\t3416050480.jpg#4r1n\tneutral"
            "\t\t\t\t\n"
            f"contradiction\t{MNLI_PARSES}\tA person on a horse jumps over a broken down airplane.\t"
            "A person is at a diner, ordering an omelette.\t3416050480.jpg#4\t3416050480.jpg#4r1c\tcontradiction"
            "\t\t\t\t\n"
            f"-\t{MNLI_PARSES}\tTwo women are embracing while holding to go packages.\t"
            "The sisters are hugging goodbye.\t4705552913.jpg#2\t4705552913.jpg#2r1x\tneutral\tentailment\t"
            "contradiction\tneutral\tentailment\n"
            f"entailment\t{MNLI_PARSES}\tA person on a horse jumps over a broken down airplane.\t"
            "A person is outdoors, on a horse.\t3416050480.jpg#4\t3416050480.jpg#4r1e\tentailment\t\t\t\t\n",
            (["A person on a horse jumps over a broken down airplane."] * 3,
             ["A person is training his horse for a competition.", "A person is at a diner, ordering an omelette.",
              "A person is outdoors, on a horse."]),
            [2, 0, 1],
        ),
    },
}

SWAG = (
    ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
    '0,anetv_jkn6uvmqwh4,3416,"Members of the procession walk down the street holding small horn brass '
    'instruments. A drum line","Members of the procession walk down the street holding small horn brass '
    'instruments.",A drum line,gold,passes by walking down the street playing their instruments.,has heard '
    "approaching them.,arrives and they're outside dancing and asleep.,turns the lead singer watches the "
    "performance.,0\n"
    '1,lsmdc3001_21_JUMP_STREET-422,11783,"He rides a bike, then jumps. Someone","He rides a bike, then '
    'jumps.",Someone,gold,\"looks at him, grinning.\",walks away.,smiles.,\"leans in, \"\"ok\"\".\",3\n'
)


def write(tmp_path, task, split, text=None):
    """Writes the fixture of (task, split) to `tmp_path/<task>_<split>.tsv`; returns the path."""
    path = os.path.join(str(tmp_path), f"{task}_{split}.{'csv' if task == 'swag' else 'tsv'}")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text if text is not None else (SWAG if task == "swag" else GLUE[task][split][0]))
    return path
