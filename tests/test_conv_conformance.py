"""Every built-in on convolutional networks: the conformance suite (harness/check.py) on the tiny NiN zoo
`digits-nin` (DEMOGEN's Network-in-Network in 1-D, with and without batchnorm and dropout). The one built-in
defined for MLPs only refuses in one line that names why."""
from __future__ import annotations

import pytest

from genbench.harness import check_measure
from genbench.measures import list_measures

MLP_ONLY = {"pacbayes.marginal_likelihood": "analytic NNGP kernel"}  # the NNGP of a ReLU MLP (measures/marginal.py)


@pytest.mark.parametrize("name", list_measures())
def test_every_builtin_passes_the_conformance_suite_on_a_conv_zoo(name, nin_zoo):
    report = check_measure(name, nin_zoo)
    if name in MLP_ONLY:
        assert not report.passed and MLP_ONLY[name] in str(report) and "this model is 'nin'" in str(report)
    else:
        assert report.passed, str(report)


def test_the_conv_zoo_learned_its_task(nin_zoo):
    """The suite is only meaningful on networks that fit: every model of digits-nin above 90% train accuracy."""
    assert len(nin_zoo.table) == 8 and set(nin_zoo.table["family"]) == {"nin"}
    assert float(nin_zoo.table["train_acc"].min()) > 0.9
