"""Session 13 (helper sim, issue 30): the global refit's launch floor held (calibration.fit.fits' launch;
scripts/refit_calibration.py --hold-launch): the refit for a change of the roofline's terms, without the 25-point
scan of the launch floor and extra-launch cost (a fifth of the CPU)."""
from kernelstrain.calibration import Fit
from kernelstrain.calibration.fit import fit_terms, fits
from test_calibration import _synthetic


def test_fits_holds_a_given_launch_floor_without_scanning():
    """fits(launch=(a, b)): the fit at that launch floor and extra-launch cost, what fit_terms gives there."""
    rows = _synthetic(Fit(launch_us={"nvidia": 2.0, "amd": 2.5}, extra_launch_us={"nvidia": 4.0, "amd": 5.0},
                          ceilings={"m1": {"v1": 1.5}}), n_per=6)
    got = fits([rows], launch=(2.0, 4.0))[0]
    assert got == fit_terms(rows, 2.0, 4.0)[0]
    assert got.launch_us["nvidia"] == 2.0 and got.extra_launch_us["nvidia"] == 4.0
