"""The course's chapters as packages: chapters/chNN_name/ holds chapter NN's kernels (.cu), its host code
(Python modules that build, launch, check and time them) and its figures.toml; the notebook that teaches it is
chapters/chNN_name.ipynb, beside the folder.

Chapter code is imported like any module of the project, with the course root on the path (an editable
install, or PYTHONPATH=<course root>):

    from chapters.ch04_wgmma import ladder
    python -m chapters.ch04_wgmma.ladder check "TMA ring"      # a chapter module run as a program
"""
