"""Hardware adapters: the shaker and panel through gpiozero, the dice sensor through pyserial."""
