"""The Doppler dual policy (SEL / PLC): episodes, networks, training, and the placement
method and BRKGA seed arm built on it. (The Doppler simulator is `regal.scoring.doppler_sim`.)"""
