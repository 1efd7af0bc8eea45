#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian machine: OCR engine and languages,
# LibreOffice (legacy .doc/.xls/.ppt and PDF fixtures), Thai fonts (rendered test scans), Chromium
# and its driver (console browser tests), real PDF manuals + qpdf (the debian-pdf page-level eval
# set of bench/build_pdf_eval.py), LibreOffice help (cs, ko, sv, and en-US to drop untranslated
# index entries) and the Python HTML docs (keyword sets of bench/build_keyword_eval.py in the floors
# and tests), procps (`ps`: the sandbox's fallbacks where /proc is missing, simulated in tests),
# then the pinned Python packages.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
APT_PACKAGES=(
  tesseract-ocr tesseract-ocr-eng tesseract-ocr-rus tesseract-ocr-tha
  libreoffice-writer libreoffice-calc libreoffice-impress
  fonts-thai-tlwg fonts-dejavu-core
  chromium chromium-driver
  octave-doc gnuplot-doc asymptote-doc qpdf
  libreoffice-help-en-us libreoffice-help-cs libreoffice-help-ko libreoffice-help-sv python3.11-doc
  procps
)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
